"""Optional price table: USD per million tokens, per model, so runs report what they cost.

A table is a JSON object keyed by model name (exact, else the longest key the model name starts with, so
``gpt-4o`` covers ``gpt-4o-2024-08-06``)::

    {"gpt-4o": {"input": 2.5, "output": 10.0, "cached_input": 1.25},
     "claude-sonnet-4": {"input": 3.0, "output": 15.0, "cached_input": 0.3, "cache_write": 3.75}}

``cached_input`` and ``cache_write`` default to ``input``. Reasoning tokens are billed as output tokens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .messages import Usage

PRICE_KEYS = ("input", "output", "cached_input", "cache_write")
MAX_PRICE = 1e6  # USD per million tokens: with counts bounded by MAX_TOKEN_COUNT, every cost stays finite


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        cached = self.input if self.cached_input is None else self.cached_input
        writing = self.input if self.cache_write is None else self.cache_write
        uncached = max(usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens, 0)
        total = (
            uncached * self.input
            + usage.cache_read_tokens * cached
            + usage.cache_write_tokens * writing
            + usage.output_tokens * self.output
        )
        return total / 1e6

    def to_json(self) -> dict:
        return {key: getattr(self, key) for key in PRICE_KEYS if getattr(self, key) is not None}


def _price(model: str, entry: object) -> Price:
    if not isinstance(entry, dict) or not {"input", "output"} <= entry.keys() or not entry.keys() <= set(PRICE_KEYS):
        raise ValueError(f"price table entry {model!r} must be an object with input and output (and optionally "
                         f"cached_input, cache_write) in USD per million tokens")
    for key, value in entry.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= MAX_PRICE:
            raise ValueError(f"price table entry {model!r}: {key} must be a number in 0..{MAX_PRICE:g}")
    return Price(**{key: float(value) for key, value in entry.items()})


def load_price(path: str | Path, model: str) -> Price | None:
    """The price of ``model`` in the table at ``path``; None when the table does not list it."""
    try:
        table = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"cannot read the price table {path}: {error.strerror or error}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"price table {path} is not JSON: {error.msg} at line {error.lineno}") from None
    if not isinstance(table, dict):
        raise ValueError(f"price table {path} must be a JSON object keyed by model name")
    prices = {name: _price(name, entry) for name, entry in table.items()}
    if model in prices:
        return prices[model]
    prefixes = [name for name in prices if model.startswith(name)]
    return prices[max(prefixes, key=len)] if prefixes else None

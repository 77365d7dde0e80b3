"""The context window a server reports about itself, so a run is held to the real window instead of an assumed one.

- OpenAI-compatible ``GET {base}/models``: vLLM ``max_model_len``, OpenRouter ``context_length``, LM Studio
  ``loaded_context_length`` / ``max_context_length`` -- read from the entry whose ``id`` is the model (or the only
  entry, as vLLM serves one model);
- LM Studio's own ``GET /api/v0/models/{model}``; llama.cpp's ``GET /props``
  (``default_generation_settings.n_ctx``).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

import httpx2

from .messages import loads_bounded
from .transport import TransportFailure

WINDOW_FIELDS = ("max_model_len", "loaded_context_length", "context_length", "max_context_length")
MAX_DEPTH = 16  # a model listing is a few levels deep


def _entry(listing: object, model: str) -> dict | None:
    entries = listing.get("data") if isinstance(listing, dict) else listing
    if not isinstance(entries, list):
        return listing if isinstance(listing, dict) else None
    entries = [entry for entry in entries if isinstance(entry, dict)]
    named = [entry for entry in entries if entry.get("id") == model]
    return named[0] if named else (entries[0] if len(entries) == 1 else None)


def _window(entry: dict | None) -> object:
    if entry is None:
        return None
    settings = entry.get("default_generation_settings")
    if isinstance(settings, dict):
        return settings.get("n_ctx")
    return next((entry[name] for name in WINDOW_FIELDS if name in entry), None)


def reported_window(get: Callable[[str], httpx2.Response], base_url: str, model: str) -> tuple[int, str] | None:
    """``(tokens, url)`` of the first window the server reports for ``model``; None when it reports none. ``get``
    answers a URL with its response, body read (within the reply size ceiling) or raises (the provider's client)."""
    root = base_url.removesuffix("/v1")
    for url in (f"{base_url}/models", f"{root}/api/v0/models/{quote(model, safe='')}", f"{root}/props"):
        try:
            response = get(url)
            if response.status_code != 200:
                continue
            value = _window(_entry(loads_bounded(response.text, MAX_DEPTH, strict=False), model))
        except (TransportFailure, ValueError, AttributeError):
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, url
    return None

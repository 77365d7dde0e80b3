"""Output sinks, each escaped for its own format: JSON files, CSV cells, Markdown and LaTeX table text, terminals.

Model names, provider names, dataset folder names and tool-call names are chosen by whoever runs a model server or
ships a dataset. They reach spreadsheets (``=HYPERLINK(...)`` runs as a formula), Markdown tables (a newline
starts a new row), LaTeX (a newline ends a paragraph inside a cell) and the operator's terminal (escape sequences
set the window title, clear the screen, forge hyperlinks). One function per sink makes any text harmless there.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from .provenance import environment_secrets
from .redaction import redact_text

# C0 and C1 controls; what a terminal may interpret (ESC, CSI, OSC, BEL, backspace, carriage return, ...)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_NEWLINES = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")
_FORMAT = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")  # bidirectional overrides
# spreadsheet applications evaluate a cell that starts with one of these (OWASP "CSV injection")
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "\n")


def safe_characters(text: object) -> str:
    """``text`` with every control and bidirectional-override character replaced by '?'."""
    return _FORMAT.sub("?", _CONTROL.sub("?", str(text)))


def terminal_text(text: object) -> str:
    """``text`` safe to print on a terminal or into a log, whoever wrote it: without credentials
    (:func:`.redaction.redact_text`: URL userinfo, secret-named fields and parameters, every key the environment
    holds) and without control characters. Redacting at the sink every terminal line passes through means no new
    warning or error message can print a key."""
    return safe_characters(redact_text(str(text), environment_secrets()))


def one_line(text: object) -> str:
    """Newlines (and other line separators) folded to one space, then controls dropped: a table cell's text (the
    records a report reads were redacted when written)."""
    return safe_characters(_NEWLINES.sub(" ", str(text)))


def terminal_line(text: object) -> str:
    """One line of a live display (a progress line, a note above it): folded like a cell, redacted like any
    terminal text."""
    return terminal_text(_NEWLINES.sub(" ", str(text)))


def csv_cell(value: Any) -> Any:
    """A CSV value a spreadsheet shows as text: strings starting with a formula prefix get a leading quote.
    Numbers stay numbers (a negative number is data, not a formula)."""
    if not isinstance(value, str) or not value.startswith(FORMULA_PREFIXES):
        return value
    return "'" + value


def json_text(value: Any, indent: int | None = 1) -> str:
    """Strict JSON (NaN and Infinity refused: other readers reject them), keys sorted, one trailing newline."""
    return json.dumps(value, indent=indent, sort_keys=True, allow_nan=False, default=str) + "\n"


def write_json(path: str | os.PathLike, value: Any, indent: int | None = 1) -> Path:
    """Write ``value`` as strict JSON, atomically (write-then-rename): a reader sees the whole file or none, and
    a value that is not JSON raises before anything is written. The one JSON writer of every file."""
    path = Path(path)
    text = json_text(value, indent)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path

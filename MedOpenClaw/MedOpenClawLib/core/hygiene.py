"""Argument hygiene: what every call's arguments must satisfy before any JSON schema, handler or log sees them.

JSON admits values the runtime cannot safely hold: lone surrogates (a legal ``\\ud800`` escape) abort UTF-8
encoders, control characters end up in file names and VTK strings, ``NaN``/``Infinity`` literals poison the
scene and make the state snapshot invalid JSON, and deep nesting exhausts the recursion of ``json``,
``jsonschema`` and the audit writer. One iterative walk refuses all of them for every action of every
registry, whatever front-end the call came through.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .result import ActionError

MAX_DEPTH = 32  # the deepest schema (a polygon: object > array > point > number) needs 4
MAX_VALUES = 10_000  # every value counted once: keys, items, leaves
MAX_STRING_CHARS = 4096  # PATH_MAX; labels and names have tighter schema limits
MAX_INTEGER = 2**53  # integers beyond this are not exact as JSON numbers in most clients
PREVIEW_CHARS = 80
MAX_MESSAGE_CHARS = 600

# C0/C1 control characters (NUL, newline, escape, ...) and UTF-16 surrogates, which no well-formed text holds
_FORBIDDEN_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
# numpy 2 reprs of scalars inside formatted containers (f"{list(array)}"): np.float64(1.5) -> 1.5
_NUMPY_SCALAR = re.compile(r"\bnp\.(?:float|int|uint|bool|complex|str)\w*\(([^()]*)\)")


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """A short ASCII echo of user input for messages: never the whole input, never unencodable text."""
    if isinstance(value, str):
        shown = ascii(value[:limit])
        return shown if len(value) <= limit else f"{shown}... ({len(value)} characters)"
    if isinstance(value, (dict, list, tuple)):
        return f"<{type(value).__name__} of {len(value)} items>"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<integer of {value.bit_length()} bits>"  # str() of a huge int is refused (or slow)
    if isinstance(value, (bool, int, float)) or value is None:
        text = ascii(value)
        return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} digits)"
    return f"<{type(value).__name__}>"


def bounded_message(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Error messages can quote input (schema errors, names): keep them short and encodable, and print numbers
    as plain numbers (every error message passes here, so no handler has to unwrap numpy scalars)."""
    message = _NUMPY_SCALAR.sub(r"\1", message)
    if _FORBIDDEN_CHARACTER.search(message):
        message = _FORBIDDEN_CHARACTER.sub("?", message)
    return message if len(message) <= limit else message[:limit] + "... (truncated)"


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be a name, label or path, or None when it can."""
    if len(text) > MAX_STRING_CHARS:
        return f"is longer than {MAX_STRING_CHARS} characters ({len(text)})"
    found = _FORBIDDEN_CHARACTER.search(text)
    if found is None:
        return None
    character = found.group()
    if character == "\x00":
        return "contains a NUL byte"
    if "\ud800" <= character <= "\udfff":
        return f"contains a lone surrogate U+{ord(character):04X} (not well-formed Unicode)"
    return f"contains the control character U+{ord(character):04X}"


def refused_input(arguments: Any) -> dict:
    """What the audit trace keeps of arguments the hygiene check refused: a bounded, encodable summary."""
    return {"refused_input": preview(arguments)}


def _where(path: tuple) -> str:
    return "/".join(["arguments", *(preview(part, 32).strip("'") for part in path)])


def check_arguments(arguments: Any) -> None:
    """Refuse with ``invalid_argument`` anything that is not bounded, finite, well-formed JSON data.

    Iterative (an explicit stack), so no nesting depth can raise RecursionError here.
    """
    stack: list[tuple[Any, tuple, int]] = [(arguments, (), 0)]
    seen = 0
    while stack:
        value, path, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ActionError("invalid_argument", f"arguments hold more than {MAX_VALUES} values")
        if depth > MAX_DEPTH:
            raise ActionError("invalid_argument", f"arguments are nested deeper than {MAX_DEPTH} levels")
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, str):
            problem = text_problem(value)
            if problem:
                raise ActionError("invalid_argument", f"{_where(path)}: {preview(value)} {problem}")
        elif isinstance(value, int):
            if abs(value) > MAX_INTEGER:
                raise ActionError("invalid_argument", f"{_where(path)}: integer {preview(value)} is out of range")
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise ActionError("invalid_argument", f"{_where(path)}: {value!r} is not a finite number")
        elif isinstance(value, (dict, list, tuple)):
            if seen + len(stack) + len(value) > MAX_VALUES:
                raise ActionError("invalid_argument", f"arguments hold more than {MAX_VALUES} values")
            if isinstance(value, dict):
                for key, item in value.items():
                    if not isinstance(key, str) or text_problem(key):
                        raise ActionError("invalid_argument", f"{_where(path)}: invalid name {preview(key)}")
                    stack.append((item, (*path, key), depth + 1))
            else:
                stack.extend((item, (*path, index), depth + 1) for index, item in enumerate(value))
        else:
            raise ActionError("invalid_argument", f"{_where(path)}: {preview(value)} is not a JSON value")

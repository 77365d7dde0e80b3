"""Deterministic, forgiving parsers of final model responses into the canonical answer/evidence JSON shapes.

Real model output wraps answers in markdown, code fences, parentheses and trailing prose; the parsers
accept all of that, let the last ANSWER line win, check that an option letter and its label text agree, and turn
anything unparseable into ``null`` plus a message in ``errors`` -- they never raise.
"""

from __future__ import annotations

import collections
import json
import math
import re

KEY_SLICE_FIELDS = (
    ("key_slice_axial_mm", "KEY_SLICE_AXIAL_MM"),
    ("key_slice_sagittal_mm", "KEY_SLICE_SAGITTAL_MM"),
    ("key_slice_coronal_mm", "KEY_SLICE_CORONAL_MM"),
)
NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*")
_EMPHASIS = re.compile(r"(\*\*|__|\*|`)")
# field lines are matched one line at a time, each anchored at its start, and values stripped in Python: the same
# patterns over the whole reply with re.MULTILINE (``^[\s>#-]*`` runs across blank lines, ``\s*(.*?)\s*$`` around a
# value) backtrack quadratically on a long run of newlines or spaces, and a model reply is untrusted input
_ANSWER_NAME = r"(?:final\s+)?answer"


def squash(text: str) -> str:
    """Lower-case, collapse whitespace and strip punctuation at the ends: how labels are compared."""
    return re.sub(r"\s+", " ", str(text)).strip().strip(".,;:*_`'\"").strip().lower()


def clean_text(text: str) -> str:
    """Drop code fences and markdown emphasis; keep line structure (field lines are line-based)."""
    text = _FENCE.sub("", text.replace("\r\n", "\n"))
    return _EMPHASIS.sub("", text)


def _last_value(text: str, name_pattern: str) -> str | None:
    """Value of the last ``NAME: value`` line (Markdown quote, heading or list marks before the name allowed); a
    name line with nothing after the colon takes the next non-blank line as its value. Linear in ``text``: what
    precedes the name cannot run past its line, and the value is cut and stripped in Python."""
    pattern = re.compile(r"^[^\S\n>#-]*(?:[>#-][^\S\n>#-]*)*" + name_pattern + r"[^\S\n]*[:=]",
                         re.IGNORECASE | re.MULTILINE)
    match = next(iter(collections.deque(pattern.finditer(text), maxlen=1)), None)
    if match is None:
        return None
    rest = text[match.end():]
    line, _, following = rest.partition("\n")
    if line.strip():
        return line.strip()
    return next((line.strip() for line in following.split("\n") if line.strip()), "")


def last_field(text: str, name: str) -> str | None:
    """Value of the last ``NAME: value`` line (name case-insensitive, underscores or spaces)."""
    return _last_value(text, re.escape(name).replace("_", "[_ ]"))


def parse_choice(
    value: str | None, options: tuple[tuple[str, str], ...], what: str, errors: list[str]
) -> str | None:
    """One option letter from ``"(B)"``, ``"B)"``, ``"B. Oligodendroglioma"``, ``"B"`` or the label
    text alone.

    A letter followed by label text must agree with that option's label, otherwise the answer is null.
    """
    if value is None or not value.strip():
        errors.append(f"{what}: missing")
        return None
    letters = {letter for letter, _ in options}
    by_label = {squash(label): letter for letter, label in options}
    text = value.strip()
    match = re.match(r"^[\(\[]?([A-Za-z])(?![A-Za-z])[\)\]]?[\s.:,)\-]*(.*)$", text, re.DOTALL)
    if match and match.group(1).upper() in letters:
        letter = match.group(1).upper()
        named = _letters_named_by(squash(match.group(2)), options)
        if named and letter not in named:
            errors.append(
                f"{what}: letter {letter} disagrees with label text {match.group(2).strip()[:60]!r}"
            )
            return None
        return letter
    key = squash(text)
    if key in by_label:
        return by_label[key]
    named = _letters_named_by(key, options)
    if len(named) == 1:
        return named.pop()
    errors.append(f"{what}: cannot read an option from {text[:80]!r}")
    return None


def _letters_named_by(text: str, options: tuple[tuple[str, str], ...]) -> set[str]:
    """Option letters whose label text starts ``text`` (label followed by prose) or that ``text``
    abbreviates."""
    if len(text) < 2:
        return set()
    named = set()
    for letter, label in options:
        key = squash(label)
        if text == key or text.startswith(key + " ") or (len(text) >= 4 and key.startswith(text)):
            named.add(letter)
    return named


def parse_float(value: str | None, what: str, errors: list[str]) -> float | None:
    """A number from ``"12.5"``, ``"12.5 mm"``, ``"-3mm"``, ``"S 12.5"``; null with an error otherwise."""
    if value is None:
        errors.append(f"{what}: missing")
        return None
    match = re.search(NUMBER, value)
    if not match:
        errors.append(f"{what}: not a number: {value[:60]!r}")
        return None
    if re.match(r",\d", value[match.end():]):  # "12,5" or "1,234.5": reading 12 or 1 would be a silent error
        errors.append(f"{what}: ambiguous number (decimal comma or thousands separator): {value[:60]!r}")
        return None
    return _finite([float(match.group(0))], what, value, errors)[0]


def _finite(numbers: list[float], what: str, text: str, errors: list[str]) -> list:
    """``numbers`` if all are finite; otherwise None for each, with an error (``1e999`` reads as infinity, which
    no score may hold and strict JSON cannot write)."""
    if all(math.isfinite(number) for number in numbers):
        return numbers
    errors.append(f"{what}: not a finite number: {text[:60]!r}")
    return [None] * len(numbers)


# a separator is a comma or semicolon with spaces around it, or spaces alone: written so that a run of spaces can be
# split only one way (``\s*[,;\s]\s*`` tries every split of it: quadratic on hostile replies)
_COMMA = r"(?:\s*[,;]\s*|\s+)"
_TRIPLE = re.compile(r"[\[(]\s*(" + NUMBER + ")" + _COMMA + "(" + NUMBER + ")" + _COMMA + "(" + NUMBER + r")\s*[\])]")
_AXIS_VALUE = {axis: re.compile(r"(?<![A-Za-z])" + axis + r"\s*(?:[:=]\s*)?(" + NUMBER + r")") for axis in "RAS"}


def parse_ras(value: str | None, errors: list[str]) -> list[float] | None:
    """Three floats from ``[r, a, s]``, ``(r, a, s)`` or ``r, a, s`` (units allowed). A line with more numbers
    (``[12, -4, 6] mm (voxel 120, 88, 45)``) is read by, in order: the first bracketed triple, the values named
    ``R``/``A``/``S``; anything else with other than three numbers is refused rather than guessed."""
    if value is None:
        errors.append("ras: missing")
        return None
    numbers = re.findall(NUMBER, value)
    if len(numbers) == 3:
        return _finite_triple(numbers, value, errors)
    triple = _TRIPLE.search(value)
    if triple:
        return _finite_triple(triple.groups(), value, errors)
    named = [pattern.search(value) for pattern in _AXIS_VALUE.values()]
    if all(named):
        return _finite_triple([match.group(1) for match in named], value, errors)
    errors.append(f"ras: expected three numbers, got {value[:80]!r}")
    return None


def _finite_triple(numbers, value: str, errors: list[str]) -> list[float] | None:
    finite = _finite([float(number) for number in numbers], "ras", value, errors)
    return None if None in finite else finite


def parse_yes_no(value: str | None, what: str, errors: list[str]) -> bool | None:
    if value is None:
        errors.append(f"{what}: missing")
        return None
    word = squash(value).split(" ")[0] if squash(value) else ""
    if word in ("yes", "y", "true"):
        return True
    if word in ("no", "n", "false"):
        return False
    errors.append(f"{what}: expected YES or NO, got {value[:40]!r}")
    return None


def parse_radiology_evidence(text: str, errors: list[str]) -> dict:
    evidence: dict = {}
    for key, name in KEY_SLICE_FIELDS:
        evidence[key] = parse_float(last_field(text, name), key, errors)
    evidence["ras"] = parse_ras(last_field(text, "RAS"), errors)
    return evidence


def last_answer(text: str) -> str | None:
    return _last_value(text, _ANSWER_NAME)


JSON_SLICE = 256  # characters a JSON candidate is first decoded from; the slice grows only while the value runs on
TRUNCATION_REACH = 16  # a decode error this close to a slice's end may be the cut (``tr`` of ``true``, ``\\u12``)


def _decode_at(text: str, start: int) -> tuple[object, int]:
    """The JSON value starting at ``text[start]`` (None if there is none) and how many characters were read to
    tell. It is decoded from a slice that grows only while the value runs past it: a failed candidate costs about
    what was read of it. ``raw_decode(text, start)`` on the whole reply instead costs the length of the text
    *before* ``start`` on every failure (the error counts lines up to its position): quadratic over a reply of
    many ``{``."""
    size, read = JSON_SLICE, 0
    while True:
        doc = text[start:start + size]
        try:
            value, end = _DECODER.raw_decode(doc)
            return value, read + end
        except json.JSONDecodeError as error:
            read += error.pos + 1
            cut = start + size < len(text) and (error.pos >= len(doc) - TRUNCATION_REACH
                                                or error.msg.startswith("Unterminated string"))
            if not cut:
                return None, read
            size *= 4
        except RecursionError:  # nested deeper than the interpreter's stack: not an answer
            return None, read + len(doc)


_DECODER = json.JSONDecoder()
_OBJECT_START = re.compile(r'\{\s*["}]')  # what a JSON object's first characters must be
MAX_JSON_FAILURES = 256
# characters all candidates together may read, per character of the reply: each candidate is decoded on its own, so
# a reply of nested objects (``{"a":{"a":...``) costs each ``{`` a decode of everything inside it, quadratic in the
# reply, where a real answer is found within its first few candidates from the end
MAX_JSON_READ_FACTOR = 32


def find_json_object(text: str, keys: tuple[str, ...]) -> dict | None:
    """The last JSON object in ``text`` (by where it starts) that has at least one of ``keys`` (prose before or
    after is ignored). Candidates are tried from the last ``{`` backwards, so the answer written at the end of a
    reply is found first. The search is linear in the reply: it stops after :data:`MAX_JSON_FAILURES` candidates
    that start like an object but do not decode (a hostile ``{"a":[{"a":[...`` would otherwise cost each of its
    ``{`` a nested decode down to the interpreter's recursion limit), or once the candidates together have read
    :data:`MAX_JSON_READ_FACTOR` times the reply. A reply in which no key is written (``"key"``, or escaped: then
    it holds a backslash) has no such object, and none of its candidates is decoded."""
    if "\\" not in text and not any(f'"{key}"' in text for key in keys):
        return None
    start, failures, budget = len(text), 0, MAX_JSON_READ_FACTOR * len(text)
    while failures < MAX_JSON_FAILURES and budget > 0 and (start := text.rfind("{", 0, start)) >= 0:
        if not _OBJECT_START.match(text, start):
            continue
        value, read = _decode_at(text, start)
        if isinstance(value, dict) and any(key in value for key in keys):
            return value
        failures += value is None
        budget -= read
    return None


def parse_localizations(value, errors: list[str]) -> list[list[float]]:
    """``[{"x": .., "y": ..}, ...]`` or ``[[x, y], ...]``; malformed entries are dropped with an error."""
    if value is None:
        return []
    if not isinstance(value, list):
        errors.append("localizations: not a list")
        return []
    points = []
    for index, item in enumerate(value):
        if isinstance(item, dict):
            pair = (item.get("x"), item.get("y"))
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            pair = tuple(item)
        else:
            pair = (None, None)
        try:
            point = [float(pair[0]), float(pair[1])]
        except (TypeError, ValueError):
            point = None
        # NaN/Infinity (Python's json accepts them) would hit no ROI yet make an N slide's list non-empty
        if point is None or not all(math.isfinite(value) for value in point):
            errors.append(f"localizations[{index}]: not an x/y pair: {json.dumps(item)[:60]}")
            continue
        points.append(point)
    return points


def agreeing(option, label, options, normalize, what: str, errors: list[str]):
    """Combine an option letter and a label value; both given and different -> null."""
    from_option = None
    if option is not None and str(option).strip():
        from_option = dict(options).get(str(option).strip().strip("()").upper())
        if from_option is None:
            errors.append(f"{what}: {option!r} is not an option letter")
    from_label = None
    if label is not None and str(label).strip():
        from_label = normalize(str(label))
        if from_label is None:
            errors.append(f"{what}: {label!r} is not a valid label")
    if from_option and from_label and from_option != from_label:
        errors.append(f"{what}: option {option!r} ({from_option}) disagrees with label {label!r}")
        return None
    result = from_label or from_option
    if result is None and not errors:
        errors.append(f"{what}: missing")
    return result


def normalizer(values: tuple[str, ...]):
    lookup = {squash(value).replace(" ", "_"): value for value in values}

    def normalize(text: str) -> str | None:
        return lookup.get(squash(text).replace(" ", "_").replace("-", "_"))

    return normalize

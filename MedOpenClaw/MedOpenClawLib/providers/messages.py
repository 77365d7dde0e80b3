"""A provider-neutral conversation: kept by the episode loop, translated by each provider.

Keeping one neutral form means the loop, the offline agents and the audit receipts never depend on a vendor's
message shapes, and a conversation can be replayed against a different provider.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from .images import png_size_b64

ROLES = ("system", "user", "assistant", "tool")
TRUNCATED_STOPS = frozenset({"length", "max_tokens", "model_context_window_exceeded"})
MAX_ARGUMENT_DEPTH = 32  # tool arguments are flat objects: anything deeper is refused before json.loads recurses
MAX_ARGUMENT_CHARS = 65_536
MAX_INT_DIGITS = 64  # no argument is a 64-digit integer; Python refuses to parse more than 4300 digits at all
MAX_TOKEN_COUNT = 2**53  # the largest count every JSON reader keeps exact; no call comes near it


@dataclass
class ImageInput:
    """One PNG shown to the model; ``label`` says where it came from (e.g. ``observe:axial``)."""

    png_base64: str
    label: str = ""
    view: str = ""
    image_id: str | None = None  # the viewer's id: 0..999 arguments may name it after the pixels are gone
    offset_mm: float | None = None

    @classmethod
    def from_png(cls, data: bytes, label: str = "", **where: Any) -> ImageInput:
        return cls(base64.b64encode(data).decode("ascii"), label, **where)

    def size(self) -> tuple[int, int]:
        """(width, height) read from the PNG header."""
        return png_size_b64(self.png_base64)

    def name(self) -> str:
        """What names this image in text: its id (or label), view and offset, e.g. ``img-12 axial 5.5 mm``."""
        offset = None if self.offset_mm is None else f"{self.offset_mm:g} mm"
        return " ".join(part for part in (self.image_id or self.label or "(unnamed)", self.view, offset) if part)

    def stub(self) -> str:
        """The text that stands in for this image once the conversation policy stops sending its pixels."""
        return f"[image {self.name()}: not attached" + ("; its id stays valid]" if self.image_id else "]")

    def sha256(self) -> str:
        return hashlib.sha256(base64.b64decode(self.png_base64)).hexdigest()

    def receipt(self) -> dict:
        """What a trace keeps of an image: its label and digest, never the pixels."""
        return {"label": self.label, "sha256": self.sha256()}


@dataclass
class ToolCall:
    """A tool call as the model emitted it; ``arguments`` is None when ``raw_arguments`` did not parse."""

    id: str
    name: str
    arguments: dict | None
    raw_arguments: str = ""
    parse_error: str | None = None
    repair: str | None = None  # how malformed arguments were normalised, when they were
    vendor: dict = field(default_factory=dict)  # server fields of the call (thought signatures), echoed verbatim
    from_text: bool = False  # written as text in the reply's content, not as a structured call

    def receipt(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "raw_arguments": self.raw_arguments,
            "parse_error": self.parse_error,
            "repair": self.repair,
            "from_text": self.from_text,
        }


@dataclass
class Message:
    """One conversation turn. Tool results are ``role="tool"`` messages answering ``tool_call_id``."""

    role: str
    text: str = ""
    images: list[ImageInput] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    result: dict | None = None  # the structured Result a tool message's text was rendered from (not sent)
    vendor: dict | None = None  # an assistant turn's server fields ({"kind": ..., ...}), echoed to that kind only
    # what the conversation policy sends instead once the message is old, for a message the next round supersedes
    # (a round's viewer state summary); None: kept whole (tool outputs have their own stub)
    superseded: str | None = None

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")


@dataclass
class Usage:
    """Token, image, latency and cost accounting of one call, or summed over the calls of an episode or run.

    ``input_tokens`` counts every prompt token, cached ones included; ``cache_read_tokens`` (served from the
    prompt cache) and ``cache_write_tokens`` (written to it) are parts of it. ``reasoning_tokens`` are part of
    ``output_tokens``. ``model_seconds`` is the latency of the call (summed: time spent waiting for the model).
    ``cost_usd`` is None when no price table covers the model.
    """

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    images_sent: int = 0  # image inputs over all calls (a resent history image counts again)
    retries: int = 0
    # calls whose reply reported a count that is not a whole number in 0..MAX_TOKEN_COUNT (negative, 1.7e308, text):
    # their usage is unknown, the counts above leave it out (so they are lower bounds, and so is the cost)
    unknown_usage: int = 0
    model_seconds: float = 0.0
    cost_usd: float | None = None

    def add(self, other: Usage) -> None:
        for name in self.__dataclass_fields__:
            if name != "cost_usd":
                setattr(self, name, getattr(self, name) + getattr(other, name))
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd

    def to_json(self) -> dict:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["model_seconds"] = round(self.model_seconds, 3)
        if self.cost_usd is not None:
            data["cost_usd"] = round(self.cost_usd, 6)
        return data

    @classmethod
    def from_json(cls, data: dict | None) -> Usage:
        """Read back a recorded usage (unknown keys ignored, missing ones zero; a count that is not a valid count
        or a time or cost that is not a finite number >= 0 is left out and the usage marked unknown): run totals
        sum episodes."""
        usage, invalid = cls(), False
        for name, spec in cls.__dataclass_fields__.items():
            value = (data or {}).get(name)
            if value is None:
                continue
            valid = token_count(value) if spec.type == "int" else _amount(value)
            invalid |= valid is None
            if valid is not None:
                setattr(usage, name, valid)
        usage.unknown_usage = max(usage.unknown_usage, int(invalid))
        return usage


def token_count(value: object) -> int | None:
    """``value`` as a token count: a whole number in 0..MAX_TOKEN_COUNT (``12.0`` included), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():  # NaN and infinities are not integers either
        return None
    return int(value) if 0 <= value <= MAX_TOKEN_COUNT else None


def _amount(value: object) -> float | None:
    """A recorded time or cost: a finite number >= 0, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


class ReportedUsage:
    """A reply's ``usage`` object, read where it is parsed: :meth:`count` gives each count as a valid token count,
    0 when the server did not report it, and 0 with the name kept in ``unknown`` when it reported something else
    (negative, ``1.7e308``, a string; a ``usage`` that is not an object): one bad number marks the call's usage
    unknown instead of ending a run with an infinite cost or summing to negative totals."""

    def __init__(self, usage: object):
        self.usage = usage if isinstance(usage, dict) else {}
        self.unknown: list[str] = [] if usage is None or isinstance(usage, dict) else ["usage"]

    def count(self, *path: str) -> int:
        """The count at ``path`` (``"prompt_tokens_details", "cached_tokens"``)."""
        value: object = self.usage
        for key in path:
            if value is None:
                return 0
            if not isinstance(value, dict):
                self.unknown.append(".".join(path))
                return 0
            value = value.get(key)
        if value is None:
            return 0
        count = token_count(value)
        if count is None:
            self.unknown.append(".".join(path))
        return count or 0

    def usage_of(self, **counts: int) -> Usage:
        """A :class:`Usage` of ``counts``, marked unknown when any count read so far was invalid."""
        return Usage(**counts, unknown_usage=1 if self.unknown else 0)


@dataclass
class ModelReply:
    """The model's answer to one request: free text and/or tool calls, plus the raw body for the receipt."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    raw: Any = None
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    reasoning: str = ""  # reasoning_content / thinking text, never sent back as the answer unless documented
    vendor: dict | None = None  # see Message.vendor
    request: dict | None = None  # what the request carried: images, bytes, estimated tokens, what was trimmed
    # the model declined to answer (OpenAI ``refusal`` text or ``content_filter``, Anthropic ``refusal`` stop): the
    # reason as the server gave it; the episode ends with the outcome ``refused`` (scored 0, kept in n)
    refusal: str | None = None

    @property
    def truncated(self) -> bool:
        """The server stopped at a length limit: the output-token limit (OpenAI ``length``, Anthropic
        ``max_tokens``) or the context window (Anthropic ``model_context_window_exceeded``)."""
        return self.stop_reason in TRUNCATED_STOPS

    @property
    def paused(self) -> bool:
        """Anthropic ``pause_turn``: a long server-tool turn was paused; sending it back continues it."""
        return self.stop_reason == "pause_turn"

    @property
    def empty(self) -> bool:
        """Nothing a history could carry: no text, no tool call, no vendor content to echo."""
        return not self.text and not self.tool_calls and not self.vendor


def _json_depth(text: str) -> int:
    """Deepest bracket nesting of JSON text (brackets inside strings ignored), found without recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


class InvalidNumber(str):
    """A number a lenient parse kept as its text (too long, or not finite); :func:`invalid_number` finds it."""


def _number(text: str, strict: bool) -> Any:
    digits = len(text.lstrip("-").split(".")[0].split("e")[0].split("E")[0])
    value: Any = None
    if digits <= MAX_INT_DIGITS and text not in ("NaN", "Infinity", "-Infinity"):
        value = float(text) if any(char in text for char in ".eE") else int(text)
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        if strict:
            raise ValueError(f"number {text[:24]}{'...' if len(text) > 24 else ''} is out of range")
        return InvalidNumber(text)
    return value


def loads_bounded(text: str, max_depth: int = MAX_ARGUMENT_DEPTH, strict: bool = True) -> Any:
    """``json.loads`` for untrusted model output: nesting beyond ``max_depth`` is refused with a ValueError (never
    a RecursionError); integers of more than 64 digits and non-finite numbers (``1e999``, ``NaN``) raise a
    ValueError too, or with ``strict=False`` stay as :class:`InvalidNumber` for the caller to refuse per field."""
    depth = _json_depth(text)
    if depth > max_depth:
        raise ValueError(f"nested {depth} levels deep (at most {max_depth})")
    number = lambda value: _number(value, strict)  # noqa: E731 - one hook for ints, floats and constants
    return json.loads(text, parse_float=number, parse_int=number, parse_constant=number)


def invalid_number(value: Any) -> str | None:
    """The first :class:`InvalidNumber` inside a parsed value (iteratively: depth is already bounded)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, InvalidNumber):
            return f"number {item[:24]}{'...' if len(item) > 24 else ''} is out of range"
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _decode(text: str) -> tuple[Any, str | None]:
    try:
        return loads_bounded(text), None
    except json.JSONDecodeError as error:
        return None, f"arguments are not valid JSON: {error.msg} at position {error.pos}"
    except ValueError as error:
        return None, f"arguments refused: {error}"


def parse_tool_arguments(raw: Any) -> tuple[dict | None, str | None, str | None]:
    """Decode a model's tool arguments: ``(arguments, parse_error, repair)``.

    Models emit arguments as a JSON string that is sometimes empty, fenced, or encoded twice. Those three
    unambiguous cases are repaired (and the repair reported); anything else is rejected, never guessed at. Deep
    nesting, huge integers and non-finite numbers are refused here, so no reply can crash the episode.
    """
    if isinstance(raw, dict):
        return raw, None, None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None, "empty arguments read as {}"
    if not isinstance(raw, str):
        return None, f"arguments must be a JSON object, got {type(raw).__name__}", None
    if len(raw) > MAX_ARGUMENT_CHARS:
        return None, f"arguments refused: {len(raw)} characters (at most {MAX_ARGUMENT_CHARS})", None
    text = raw.strip()
    repair = None
    if text.startswith("```"):
        text = text.strip("`").strip()
        if text.lower().startswith("json"):
            text = text[4:].strip()
        repair = "stripped a markdown code fence"
    value, error = _decode(text)
    if error:
        return None, error, None
    if isinstance(value, str):
        value, error = _decode(value)
        if error:
            return None, error, None
        repair = "decoded JSON arguments that were encoded twice"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {type(value).__name__}", None
    return value, None, repair

"""A provider-neutral conversation: kept by the episode loop, translated by each provider.

Keeping one neutral form means the loop, the offline agents and the audit receipts never depend on a vendor's
message shapes, and a conversation can be replayed against a different provider.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

ROLES = ("system", "user", "assistant", "tool")


@dataclass
class ImageInput:
    """One PNG shown to the model; ``label`` says where it came from (e.g. ``observe:axial``)."""

    png_base64: str
    label: str = ""

    @classmethod
    def from_png(cls, data: bytes, label: str = "") -> ImageInput:
        return cls(base64.b64encode(data).decode("ascii"), label)

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

    def receipt(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "raw_arguments": self.raw_arguments,
            "parse_error": self.parse_error,
            "repair": self.repair,
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
        """Read back a recorded usage (unknown keys ignored, missing ones zero): run totals sum episodes."""
        usage = cls()
        for name in cls.__dataclass_fields__:
            value = (data or {}).get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                setattr(usage, name, value)
        return usage


@dataclass
class ModelReply:
    """The model's answer to one request: free text and/or tool calls, plus the raw body for the receipt."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    raw: Any = None
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None


def parse_tool_arguments(raw: Any) -> tuple[dict | None, str | None, str | None]:
    """Decode a model's tool arguments: ``(arguments, parse_error, repair)``.

    Models emit arguments as a JSON string that is sometimes empty, fenced, or encoded twice. Those three
    unambiguous cases are repaired (and the repair reported); anything else is rejected, never guessed at.
    """
    if isinstance(raw, dict):
        return raw, None, None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None, "empty arguments read as {}"
    if not isinstance(raw, str):
        return None, f"arguments must be a JSON object, got {type(raw).__name__}", None
    text = raw.strip()
    repair = None
    if text.startswith("```"):
        text = text.strip("`").strip()
        if text.lower().startswith("json"):
            text = text[4:].strip()
        repair = "stripped a markdown code fence"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        return None, f"arguments are not valid JSON: {error.msg} at position {error.pos}", None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            return None, f"arguments are not valid JSON: {error.msg} at position {error.pos}", None
        repair = "decoded JSON arguments that were encoded twice"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {type(value).__name__}", None
    return value, None, repair

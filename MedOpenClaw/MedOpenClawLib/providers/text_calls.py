"""Tool calls a model wrote as text in its reply instead of as structured calls.

A server without a tool parser (vLLM without ``--tool-call-parser``, a chat template that does not map the
model's tool tokens) passes the model's own tool-call syntax through as ``content``. Three syntaxes are read:

- Hermes / Qwen: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (one block per call);
- Mistral: ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`` or ``[TOOL_CALLS]name[ARGS]{...}``;
- bare JSON: the whole reply is ``{"name": ..., "arguments"|"parameters": {...}}`` (or a list of them), optionally
  fenced or after Llama's ``<|python_tag|>`` -- accepted only when the name is one of the offered tools, so an
  answer that happens to be JSON is never mistaken for a call.

Each call found is counted as a protocol deviation by the episode (the model did not use the API's tool calls).
"""

from __future__ import annotations

import json
import re

from .messages import ToolCall, invalid_number, loads_bounded, parse_tool_arguments

HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
MISTRAL = "[TOOL_CALLS]"
MISTRAL_ARGS = re.compile(r"\s*([A-Za-z0-9_\-]+)\s*(?:\[CALL_ID\]\s*[A-Za-z0-9]+\s*)?\[ARGS\]", re.DOTALL)
FENCE = "```"


def _call(index: int, name: object, arguments: object) -> ToolCall | None:
    if not isinstance(name, str) or not name:
        return None
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments if arguments is not None else {})
    parsed, error, repair = parse_tool_arguments(raw)
    return ToolCall(id=f"text_call_{index}", name=name, arguments=parsed, raw_arguments=raw, parse_error=error,
                    repair=repair, from_text=True)


def _objects(text: str) -> list[dict] | None:
    """A JSON object or list of objects, or None when ``text`` is not one."""
    try:
        value = loads_bounded(text, 40, strict=False)
    except ValueError:
        return None
    if invalid_number(value):
        return None
    items = value if isinstance(value, list) else [value]
    return items if items and all(isinstance(item, dict) for item in items) else None


def _from_objects(items: list[dict], start: int) -> list[ToolCall]:
    calls = []
    for item in items:
        function = item.get("function") if isinstance(item.get("function"), dict) else item
        arguments = function.get("arguments", function.get("parameters"))
        call = _call(start + len(calls), function.get("name"), arguments)
        if call is not None:
            calls.append(call)
    return calls


def _hermes(text: str) -> tuple[list[str], str]:
    """The blocks between ``<tool_call>`` and ``</tool_call>`` (or the end: an unclosed last block) and the text
    outside them. Found with ``str.find``, so linear in the reply: a regex with ``\\s*(.*?)\\s*`` around the block
    backtracks quadratically on a whitespace run inside an unclosed block."""
    blocks, outside, position = [], [], 0
    while (start := text.find(HERMES_OPEN, position)) >= 0:
        outside.append(text[position:start])
        start += len(HERMES_OPEN)
        end = text.find(HERMES_CLOSE, start)
        blocks.append(text[start:end if end >= 0 else len(text)].strip())
        position = len(text) if end < 0 else end + len(HERMES_CLOSE)
    outside.append(text[position:])
    return blocks, "".join(outside)


def _unfenced(text: str) -> str:
    """``text`` without a Markdown code fence around it (```` ```json ... ``` ````), when it has one."""
    if len(text) >= 2 * len(FENCE) and text.startswith(FENCE) and text.endswith(FENCE):
        inner = text[len(FENCE):-len(FENCE)]
        return inner.removeprefix("json").strip()
    return text


def _mistral(text: str) -> list[ToolCall]:
    body = text.split(MISTRAL, 1)[1]
    items = _objects(body.strip())
    if items is not None:
        return _from_objects(items, 0)
    calls: list[ToolCall] = []
    for chunk in body.split(MISTRAL):
        match = MISTRAL_ARGS.match(chunk)
        if match:
            decoder = json.JSONDecoder()
            rest = chunk[match.end():].strip()
            try:
                _, end = decoder.raw_decode(rest)
            except ValueError:
                end = len(rest)
            call = _call(len(calls), match.group(1), rest[:end])
            if call is not None:
                calls.append(call)
    return calls


def text_tool_calls(text: str, offered: set[str]) -> tuple[list[ToolCall], str]:
    """The tool calls written in ``text`` and the text that remains around them; ``([], text)`` when none."""
    if HERMES_OPEN in text:
        calls: list[ToolCall] = []
        blocks, outside = _hermes(text)
        for block in blocks:
            items = _objects(block)
            calls += _from_objects(items, len(calls)) if items else []
        if calls:
            return calls, outside.strip()
    if MISTRAL in text:
        calls = _mistral(text)
        if calls:
            return calls, text.split(MISTRAL, 1)[0].strip()
    candidate = text.strip().removeprefix("<|python_tag|>").strip()
    items = _objects(_unfenced(candidate))
    if items:
        calls = _from_objects(items, 0)
        if calls and all(call.name in offered for call in calls):
            return calls, ""
    return [], text

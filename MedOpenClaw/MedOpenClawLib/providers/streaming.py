"""Server-sent events assembled into the reply the same request would get without ``stream``, per wire format, so
parsing, vendor-field round-trips and accounting stay one code path.

Streaming keeps a long generation's connection busy (no idle timeout at a proxy; the read timeout applies between
events), it is what some servers only speak, and Anthropic requires it above its non-streaming ``max_tokens``
limit. The whole stream is still read within the response size ceiling before it is parsed. Bedrock frames the same
Messages events in AWS's binary event stream, which the ``anthropic`` SDK's decoder unwraps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from .messages import loads_bounded

DEPTH = 64


def sse_events(text: str) -> list[dict]:
    """The JSON ``data:`` payloads of an event stream, in order (``[DONE]`` and comments skipped)."""
    blocks = text.replace("\r\n", "\n").split("\n\n")
    return stream_events("\n".join(line[5:].removeprefix(" ") for line in block.split("\n")
                                   if line.startswith("data:")) for block in blocks)


def stream_events(payloads: Iterable[str]) -> list[dict]:
    """Each event's JSON payload parsed, in order (empty ones and ``[DONE]`` skipped); an error event ends it."""
    events = []
    for data in payloads:
        if data and data != "[DONE]":
            event = loads_bounded(data, DEPTH, strict=False)
            if not isinstance(event, dict):
                raise ValueError("a stream event is not a JSON object")
            if event.get("type") == "error" or "error" in event:  # Anthropic's error event; OpenAI-style servers'
                raise ValueError(f"the stream ended in an error: {json.dumps(event.get('error'))[:300]}")
            events.append(event)
    return events


def _merge(target: dict, delta: dict) -> None:
    """Streamed fields appended the way the vendors split them: text joined, lists extended, objects merged."""
    for key, value in delta.items():
        if value is None:
            continue
        if isinstance(value, str) and isinstance(target.get(key), str) and key not in ("role", "id", "type"):
            target[key] += value
        elif isinstance(value, list) and isinstance(target.get(key), list):
            target[key].extend(value)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


def chat_completion(events: list[dict]) -> dict:
    """OpenAI ``chat.completion.chunk`` events -> a ``chat.completion`` (choice 0; tool calls by their index)."""
    message: dict = {"role": "assistant"}
    calls: dict[int, dict] = {}
    finish, usage = None, None
    for event in events:
        usage = event.get("usage") or usage
        for choice in event.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = dict(choice.get("delta") or {})
            for call in delta.pop("tool_calls", None) or []:
                _merge(calls.setdefault(call.get("index", len(calls)), {}), call)
            _merge(message, delta)
            finish = choice.get("finish_reason") or finish
    if calls:
        message["tool_calls"] = [{key: value for key, value in call.items() if key != "index"}
                                 for _, call in sorted(calls.items())]
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}


def anthropic_message(events: list[dict]) -> dict:
    """Anthropic ``message_start`` / ``content_block_*`` / ``message_delta`` events -> a Messages reply."""
    message: dict = {}
    blocks: dict[int, dict] = {}
    partial: dict[int, str] = {}
    for event in events:
        kind = event.get("type")
        if kind == "message_start":
            message = dict(event.get("message") or {})
        elif kind == "content_block_start":
            blocks[event.get("index", len(blocks))] = dict(event.get("content_block") or {})
        elif kind == "content_block_delta":
            index, delta = event.get("index"), dict(event.get("delta") or {})
            if delta.pop("type", None) == "input_json_delta":
                partial[index] = partial.get(index, "") + delta.get("partial_json", "")
            else:
                _merge(blocks.setdefault(index, {}), delta)
        elif kind == "message_delta":
            message.update(event.get("delta") or {})
            message["usage"] = {**(message.get("usage") or {}), **(event.get("usage") or {})}
    for index, text in partial.items():
        blocks[index]["input"] = loads_bounded(text, DEPTH, strict=False) if text.strip() else {}
    message["content"] = [block for _, block in sorted(blocks.items())]
    return message


def response(events: list[dict]) -> dict:
    """Responses API events -> the final ``response`` object (``response.completed`` / ``incomplete``)."""
    final = [event.get("response") for event in events
             if event.get("type") in ("response.completed", "response.incomplete", "response.failed")]
    if not final or not isinstance(final[-1], dict):
        raise ValueError("the stream ended without its final response event")
    return final[-1]


def generate_content_response(events: list[dict]) -> dict:
    """Gemini ``streamGenerateContent`` chunks -> a ``GenerateContentResponse``: each candidate's parts in the order
    they came, never merged (a ``thoughtSignature`` may come on a part of its own, empty text and all, and goes
    back as it came); the last finish reason, usage and prompt feedback."""
    reply: dict = {}
    candidates: dict[int, dict] = {}
    for event in events:
        for key in ("usageMetadata", "promptFeedback", "modelVersion", "responseId"):
            if key in event:
                reply[key] = event[key]
        chunks = event.get("candidates") or []
        for chunk in chunks if isinstance(chunks, list) else [None]:
            index = chunk.get("index", 0) if isinstance(chunk, dict) else None
            content = chunk.get("content") or {} if isinstance(chunk, dict) else None
            parts = content.get("parts") or [] if isinstance(content, dict) else None
            if not isinstance(index, int) or not isinstance(parts, list):
                raise ValueError(f"a stream chunk's candidate is not one: {json.dumps(chunk)[:200]}")
            candidate = candidates.setdefault(index, {"content": {"role": "model", "parts": []}})
            candidate["content"]["parts"].extend(parts)
            candidate.update({key: value for key, value in chunk.items() if key != "content"})
    reply["candidates"] = [candidate for _, candidate in sorted(candidates.items())]
    return reply


ASSEMBLERS: dict[str, Callable[[list[dict]], dict]] = {
    "chat": chat_completion, "anthropic": anthropic_message, "responses": response,
    "gemini": generate_content_response}

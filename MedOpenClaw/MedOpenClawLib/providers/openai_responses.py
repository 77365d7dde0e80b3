"""OpenAI's Responses API (``POST {base}/responses``), stateless: every request carries the conversation as input
items, as Chat Completions does, so the conversation policy and the budget apply unchanged.

- Images a tool returned go inside its ``function_call_output`` (the API takes ``input_image`` there).
- An assistant turn goes back as the output items the server sent (reasoning items with their ids and encrypted
  content, messages, function calls, any item type this module does not know) when its text and calls are still
  the server's; else as an assistant message and ``function_call`` items.
- Function tools go out with ``strict`` said explicitly: the API makes them strict by default, and strict mode
  accepts only its schema subset (``--server-profile openai-strict`` sends that subset).
- ``status: incomplete`` for ``max_output_tokens`` is truncation, for ``content_filter`` a refusal; a ``refusal``
  content part is the model declining.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from .http import ProviderError
from .messages import ImageInput, Message, ModelReply, ReportedUsage, Usage
from .openai_chat import OpenAIChatProvider, function_call

OWN_ITEMS = ("message", "function_call")  # what the neutral message holds; every other item is echoed as it came


def _image(image: ImageInput) -> dict:
    return {"type": "input_image", "image_url": f"data:image/png;base64,{image.png_base64}", "detail": "auto"}


def _input(text: str, images: list[ImageInput]) -> list[dict]:
    return ([{"type": "input_text", "text": text}] if text else []) + [_image(image) for image in images]


def _said(items: list[dict]) -> str:
    return "".join(part.get("text", "") for item in items if item.get("type") == "message"
                   for part in item.get("content") or [] if part.get("type") == "output_text")


def _assistant_items(message: Message) -> list[dict]:
    calls = [{"type": "function_call", "call_id": call.id, "name": call.name,
              "arguments": json.dumps(call.arguments if call.arguments is not None else {}, sort_keys=True)}
             for call in message.tool_calls]
    text = [{"role": "assistant", "content": message.text}] if message.text else []
    vendor = message.vendor or {}
    output = vendor.get("output") if vendor.get("kind") == "openai-responses" else None
    if not output:
        return text + calls
    ids = [item.get("call_id") for item in output if item.get("type") == "function_call"]
    if _said(output) == message.text and ids == [call["call_id"] for call in calls]:
        return list(output)
    return [item for item in output if item.get("type") not in OWN_ITEMS] + text + calls


class OpenAIResponsesProvider(OpenAIChatProvider):
    stream_format = "responses"
    stream_fields = {"stream": True}

    def _sdk_method(self) -> Callable:
        return self.client.responses.with_raw_response.create

    def wire_tools(self, tools: list[dict]) -> list[dict]:
        strict = self._limits.schema_dialect == "openai-strict"
        return [{"type": "function", "strict": strict, **{key: value for key, value in tool["function"].items()
                                                          if key != "strict"}}
                for tool in super().wire_tools(tools)]

    def _request_body(self, messages: list[Message], wire_tools: list[dict], allow_tools: bool) -> tuple[dict, int]:
        items: list[dict] = []
        images = 0
        for message in messages:
            images += len(message.images)
            if message.role == "tool":
                output = _input(message.text, message.images) if message.images else message.text
                items.append({"type": "function_call_output", "call_id": message.tool_call_id, "output": output})
            elif message.role == "assistant":
                items += _assistant_items(message)
            else:
                items.append({"role": message.role, "content": _input(message.text, message.images)})
        body: dict = {"model": self.config.model, "input": items, "max_output_tokens": self.config.max_tokens}
        return self._with_tools(body, wire_tools, allow_tools), images

    def _parse(self, response: dict) -> ModelReply:
        output = response.get("output")
        if not isinstance(output, list):
            raise ProviderError(f"unexpected responses shape: {json.dumps(response)[:300]}")
        calls, reasoning, refusals, own = [], [], [], True
        for index, item in enumerate(output):
            own = own and item.get("type") in OWN_ITEMS
            if item.get("type") == "function_call":
                calls.append(function_call(item.get("call_id") or f"call_{index}", item.get("name"),
                                           item.get("arguments"), {}))
            elif item.get("type") == "reasoning":
                reasoning += [part.get("text", "") for part in item.get("summary") or []]
            elif item.get("type") == "message":
                refusals += [part.get("refusal", "") for part in item.get("content") or []
                             if part.get("type") == "refusal"]
        incomplete = (response.get("incomplete_details") or {}).get("reason")
        usage = self._usage(response.get("usage"))
        stop = {"max_output_tokens": "length", "content_filter": "content_filter"}.get(incomplete, incomplete) or (
            "tool_calls" if calls else "stop")
        return ModelReply(
            text=_said(output), tool_calls=calls, raw=output, usage=usage, stop_reason=stop,
            reasoning="\n".join(reasoning), vendor=None if own else {"kind": "openai-responses", "output": output},
            refusal=("".join(refusals) or "refusal") if refusals else ("content_filter" if incomplete ==
                                                                         "content_filter" else None))

    @staticmethod
    def _usage(reported: object) -> Usage:
        usage = ReportedUsage(reported)
        cache_read = usage.count("input_tokens_details", "cached_tokens")
        cache_write = usage.count("input_tokens_details", "cache_write_tokens")
        return usage.usage_of(input_tokens=max(usage.count("input_tokens"), cache_read + cache_write),
                              output_tokens=usage.count("output_tokens"),
                              reasoning_tokens=usage.count("output_tokens_details", "reasoning_tokens"),
                              cache_read_tokens=cache_read, cache_write_tokens=cache_write)

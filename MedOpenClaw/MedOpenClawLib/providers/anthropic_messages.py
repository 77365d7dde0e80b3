"""Anthropic Messages API: tool_use/tool_result blocks, images inside tool results, thinking blocks, caching.

- Images a tool returned go inside its ``tool_result`` block (the API accepts image blocks there).
- An assistant turn goes back as the server sent it: ``thinking`` / ``redacted_thinking`` blocks (with their
  signatures: with extended thinking the next request is refused without them), server-tool blocks and any block
  type this module does not know, verbatim and in place; only ``tool_use`` inputs are the parsed arguments.
- A turn with no block at all (``content: []`` with ``end_turn``) is never sent back: the API refuses an empty
  assistant turn (400), so it is left out and its neighbouring user turns merge.
- Prompt caching, as Anthropic's computer-use reference loop does it: ``cache_control`` breakpoints on the system
  block (tools + system: the stable prefix) and on the last block of the two newest user turns, so each request
  reads everything up to the previous turn from the cache (4 breakpoints at most per request).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import anthropic

from .http import ProviderError
from .messages import ImageInput, Message, ModelReply, ReportedUsage, ToolCall, invalid_number
from .tool_schemas import anthropic_tools, concise
from .wires import SDKProvider

API_VERSION = "2023-06-01"
THINKING_BLOCKS = ("thinking", "redacted_thinking")
OWN_BLOCKS = ("text", "tool_use")  # what the neutral message holds; every other block is the server's, echoed
CACHED_TURNS = 2  # user turns marked for caching, besides the system block


def _image_block(image: ImageInput) -> dict:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": image.png_base64},
    }


def _blocks(text: str, images: list[ImageInput]) -> list[dict]:
    blocks: list[dict] = [{"type": "text", "text": text}] if text else []
    return blocks + [_image_block(image) for image in images]


def _assistant_blocks(message: Message) -> list[dict]:
    """The content of an assistant turn: the server's blocks verbatim when the neutral text and calls are still
    theirs; when they were rewritten (tool calls written as text), the server's own blocks first, then ours."""
    calls = [{"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments or {}}
             for call in message.tool_calls]
    text = [{"type": "text", "text": message.text}] if message.text else []
    vendor = message.vendor or {}
    content = vendor.get("content") if vendor.get("kind") == "anthropic" else None
    if not content:
        return text + calls
    uses = [block for block in content if block.get("type") == "tool_use"]
    said = "".join(block.get("text", "") for block in content if block.get("type") == "text")
    if said == message.text and [block.get("id") for block in uses] == [call["id"] for call in calls]:
        inputs = iter(calls)
        return [{**block, "input": next(inputs)["input"]} if block.get("type") == "tool_use" else block
                for block in content if block.get("type") != "text" or block.get("text")]
    return [block for block in content if block.get("type") not in OWN_BLOCKS] + text + calls


class AnthropicProvider(SDKProvider):
    """``POST {base}/v1/messages`` (``{base}/messages`` when the base ends in ``/v1``) through
    ``anthropic.Anthropic``; the key in ``x-api-key``, never an empty one (local servers may need none)."""

    sdk = anthropic
    stream_format = "anthropic"
    stream_fields = {"stream": True}

    def _make_client(self) -> anthropic.Anthropic:
        # the key in x-api-key as the Messages API documents it (Anthropic-compatible servers read it there), never
        # the SDK's Bearer form (_extra_headers); "" rather than None, which would make the SDK read
        # ANTHROPIC_API_KEY even for a server that is not Anthropic's
        key = {"x-api-key": self.config.api_key} if self.config.api_key else {}
        return anthropic.Anthropic(api_key="", base_url=self.config.base_url.removesuffix("/v1"), max_retries=0,
                                   http_client=self.http, default_headers={"anthropic-version": API_VERSION, **key})

    def _extra_headers(self) -> dict:
        return {"Authorization": anthropic.omit}

    def _sdk_method(self) -> Callable:
        return self.client.messages.with_raw_response.create

    def wire_tools(self, tools: list[dict]) -> list[dict]:
        return anthropic_tools(concise(tools))

    def _request_body(
        self, messages: list[Message], wire_tools: list[dict], allow_tools: bool
    ) -> tuple[dict, int]:
        system_text = "\n\n".join(m.text for m in messages if m.role == "system")
        wire: list[dict] = []
        images = 0
        for message in messages:
            if message.role == "system":
                continue
            images += len(message.images)
            if message.role == "assistant":
                blocks, role = _assistant_blocks(message), "assistant"
                if not blocks:
                    continue
            elif message.role == "tool":
                result = {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": _blocks(message.text or "(no output)", message.images),
                }
                if message.is_error:
                    result["is_error"] = True
                blocks, role = [result], "user"
            else:
                blocks, role = _blocks(message.text, message.images), "user"
            if wire and wire[-1]["role"] == role:  # the API wants alternating roles: merge neighbours
                wire[-1]["content"].extend(blocks)
            else:
                wire.append({"role": role, "content": blocks})
        for turn in [item for item in wire if item["role"] == "user" and item["content"]][-CACHED_TURNS:]:
            turn["content"][-1] = {**turn["content"][-1], "cache_control": {"type": "ephemeral"}}
        body: dict = {"model": self.config.model, "max_tokens": self.config.max_tokens, "messages": wire}
        if system_text:
            body["system"] = [{"type": "text", "text": system_text, "cache_control": {"type": "ephemeral"}}]
        body.update(self.sampling())
        if wire_tools:
            body["tools"] = wire_tools
            body["tool_choice"] = {"type": "auto" if allow_tools else "none"}
        return body, images

    def _parse(self, response: dict) -> ModelReply:
        content = response.get("content")
        if not isinstance(content, list):
            raise ProviderError(f"unexpected messages response shape: {json.dumps(response)[:300]}")
        texts, calls, thinking, own = [], [], [], True
        for index, block in enumerate(content):
            own = own and block.get("type") in OWN_BLOCKS
            if block.get("type") == "text":
                texts.append(block.get("text", ""))
            elif block.get("type") in THINKING_BLOCKS:
                thinking.append(block)
            elif block.get("type") == "tool_use":
                arguments = block.get("input")
                error = None if isinstance(arguments, dict) else "tool input must be a JSON object"
                if error is None and invalid_number(arguments):
                    error = f"tool input refused: {invalid_number(arguments)}"
                calls.append(
                    ToolCall(
                        id=block.get("id") or f"toolu_{index}",
                        name=block.get("name") or "",
                        arguments=None if error else arguments,
                        raw_arguments=json.dumps(arguments),
                        parse_error=error,
                    )
                )
        usage = ReportedUsage(response.get("usage"))
        cache_read = usage.count("cache_read_input_tokens")
        cache_write = usage.count("cache_creation_input_tokens")
        stop = response.get("stop_reason")
        return ModelReply(
            text="".join(texts),
            tool_calls=calls,
            raw=content,
            usage=usage.usage_of(
                # Anthropic's input_tokens excludes the cached prefix: count every prompt token, as OpenAI does
                input_tokens=usage.count("input_tokens") + cache_read + cache_write,
                output_tokens=usage.count("output_tokens"),
                reasoning_tokens=usage.count("output_tokens_details", "thinking_tokens"),
                cache_read_tokens=cache_read,
                cache_write_tokens=cache_write,
            ),
            stop_reason=stop,
            reasoning="\n".join(block.get("thinking", "") for block in thinking if block.get("type") == "thinking"),
            vendor=None if own else {"kind": "anthropic", "content": content},
            refusal=("".join(texts) or "refusal") if stop == "refusal" else None,
        )

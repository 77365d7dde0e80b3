"""OpenAI-compatible Chat Completions (OpenAI, vLLM, Ollama, llama.cpp, Mistral, OpenRouter, LM Studio, Gemini's
OpenAI endpoint).

What each server requires of the history it is sent back:

- tool messages carry text only on most of these servers, so images a tool returned are shown in one user message
  placed right after the tool results they belong to; Mistral refuses a user message right after tool messages
  (``Unexpected role 'user' after role 'tool'``), so there a short assistant turn bridges the two;
- tool-call arguments are echoed as normalised JSON (``json.dumps`` of what was parsed; ``{}`` for arguments that
  did not parse): vLLM answers 400 to a history holding invalid JSON arguments;
- vendor fields of a call and of the assistant message are echoed verbatim -- Gemini 3 answers 400 when a call's
  ``extra_content.google.thought_signature`` is missing; Claude behind LiteLLM with extended thinking answers 400
  ("Expected `thinking` ... found `tool_use`") without the message's ``thinking_blocks``, and OpenRouter wants its
  ``reasoning_details`` back; ``reasoning_content`` is never sent back (DeepSeek and vLLM reasoning parsers expect
  it dropped);
- an assistant turn with neither content nor tool calls is never sent (servers answer 400 to it);
- a ``refusal`` or a ``content_filter`` finish is the model declining (:attr:`.ModelReply.refusal`);
- the reply is the choice whose ``index`` is 0 (servers need not list choices in order);
- tool schemas go out in the server's dialect (:mod:`.tool_schemas`).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import openai

from .http import ProviderError
from .messages import (
    ImageInput,
    Message,
    ModelReply,
    ReportedUsage,
    ToolCall,
    invalid_number,
    parse_tool_arguments,
)
from .tool_schemas import concise, openai_tools
from .wires import SDKProvider

TOOL_IMAGES_TEXT = "Images returned by the tool calls above:"
BRIDGE_TEXT = "(tool results received)"
CALL_FIELDS = ("id", "type", "function")  # everything else on a tool call is a vendor field, echoed verbatim
# assistant-message vendor fields servers want back: Gemini's extra_content, LiteLLM's thinking_blocks (Anthropic
# thinking with signatures), OpenRouter's reasoning_details
MESSAGE_ECHO_FIELDS = ("extra_content", "thinking_blocks", "reasoning_details")


def _image_part(image: ImageInput) -> dict:
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image.png_base64}"}}


def _content(text: str, images: list[ImageInput]) -> str | list[dict]:
    if not images:
        return text
    parts: list[dict] = [{"type": "text", "text": text}] if text else []
    return parts + [_image_part(image) for image in images]


def _tool_call_json(call: ToolCall) -> dict:
    arguments = json.dumps(call.arguments if call.arguments is not None else {}, sort_keys=True)
    return {**call.vendor, "id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": arguments}}


def function_call(call_id: str, name: object, raw_arguments: object, vendor: dict) -> ToolCall:
    """A function call as OpenAI's APIs send it: arguments as a JSON string, parsed (and repaired) here."""
    arguments, error, repair = parse_tool_arguments(raw_arguments)
    if error is None and arguments is not None and invalid_number(arguments):
        arguments, error = None, f"arguments refused: {invalid_number(arguments)}"
    return ToolCall(id=call_id, name=name if isinstance(name, str) else "", arguments=arguments,
                    raw_arguments=raw_arguments if isinstance(raw_arguments, str) else json.dumps(raw_arguments),
                    parse_error=error, repair=repair, vendor=vendor)


class OpenAIChatProvider(SDKProvider):
    """``POST {base}/chat/completions`` through ``openai.OpenAI``; the key as a Bearer token."""

    sdk = openai
    stream_format = "chat"
    stream_fields = {"stream": True, "stream_options": {"include_usage": True}}  # usage comes in the last chunk

    def _make_client(self) -> openai.OpenAI:
        # a keyless local server: the SDK takes a key source and leaves the header out (_extra_headers)
        return openai.OpenAI(api_key=self.config.api_key or (lambda: ""), base_url=self.config.base_url, max_retries=0,
                             http_client=self.http)

    def _sdk_method(self) -> Callable:
        return self.client.chat.completions.with_raw_response.create

    def wire_tools(self, tools: list[dict]) -> list[dict]:
        return openai_tools(concise(tools), self._limits.schema_dialect)

    def _request_body(
        self, messages: list[Message], wire_tools: list[dict], allow_tools: bool
    ) -> tuple[dict, int]:
        wire: list[dict] = []
        pending: list[ImageInput] = []  # images of the tool results just before
        images = 0
        bridge = not self._limits.user_after_tool

        def user(text: str, attached: list[ImageInput]) -> None:
            """A user turn, carrying the pending tool images first."""
            if bridge and wire and wire[-1]["role"] == "tool":
                wire.append({"role": "assistant", "content": BRIDGE_TEXT})
            if pending:
                text = f"{TOOL_IMAGES_TEXT}\n{text}" if text else TOOL_IMAGES_TEXT
            wire.append({"role": "user", "content": _content(text, [*pending, *attached])})
            pending.clear()

        for message in messages:
            images += len(message.images)
            if message.role == "tool":
                wire.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text})
                pending.extend(message.images)
            elif message.role == "user":
                user(message.text, message.images)
            else:
                if pending:
                    user("", [])
                if message.role == "assistant":
                    if not message.text and not message.tool_calls:
                        continue
                    item: dict = {"role": "assistant", "content": message.text or None}
                    if message.tool_calls:
                        item["tool_calls"] = [_tool_call_json(call) for call in message.tool_calls]
                    vendor = message.vendor or {}
                    if vendor.get("kind") == "openai":
                        item.update(vendor.get("fields") or {})
                    wire.append(item)
                else:
                    wire.append({"role": message.role, "content": _content(message.text, message.images)})
        if pending:
            user("", [])
        body: dict = {"model": self.config.model, "messages": wire}
        body[self.config.token_limit_field] = self.config.max_tokens
        return self._with_tools(body, wire_tools, allow_tools), images

    def _with_tools(self, body: dict, wire_tools: list[dict], allow_tools: bool) -> dict:
        """The sampling parameters given and the tools, as both OpenAI APIs take them."""
        body.update(self.sampling())
        if wire_tools:
            body["tools"] = wire_tools
            body["tool_choice"] = "auto" if allow_tools else "none"
        return body

    def _parse(self, response: dict) -> ModelReply:
        try:
            choices = response["choices"]
            choice = next((item for item in choices if item.get("index") == 0), choices[0])
            message = choice["message"]
        except (KeyError, IndexError, TypeError, AttributeError):
            raise ProviderError(f"unexpected chat completion shape: {json.dumps(response)[:300]}") from None
        content = message.get("content") or ""
        if isinstance(content, list):  # some servers return content parts
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        calls = []
        for index, raw_call in enumerate(message.get("tool_calls") or []):
            function = raw_call.get("function") or {}
            calls.append(function_call(raw_call.get("id") or f"call_{index}", function.get("name"),
                                       function.get("arguments"),
                                       {key: value for key, value in raw_call.items() if key not in CALL_FIELDS}))
        fields = {key: message[key] for key in MESSAGE_ECHO_FIELDS if key in message}
        reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
        usage = ReportedUsage(response.get("usage"))
        # cache reads and writes: OpenAI's prompt_tokens_details, or LiteLLM's top-level Anthropic-style fields
        cache_read = usage.count("prompt_tokens_details", "cached_tokens") or usage.count("cache_read_input_tokens")
        cache_write = (usage.count("prompt_tokens_details", "cache_write_tokens")
                       or usage.count("cache_creation_input_tokens"))
        refusal = message.get("refusal")
        stop = choice.get("finish_reason")
        return ModelReply(
            text=content,
            tool_calls=calls,
            raw=message,
            usage=usage.usage_of(
                input_tokens=max(usage.count("prompt_tokens"), cache_read + cache_write),
                output_tokens=usage.count("completion_tokens"),
                reasoning_tokens=usage.count("completion_tokens_details", "reasoning_tokens"),
                cache_read_tokens=cache_read,
                cache_write_tokens=cache_write,
            ),
            stop_reason=stop,
            reasoning=reasoning if isinstance(reasoning, str) else "",
            vendor={"kind": "openai", "fields": fields} if fields else None,
            refusal=refusal if isinstance(refusal, str) and refusal else
            ("content_filter" if stop == "content_filter" else None),
        )


class AzureOpenAIProvider(OpenAIChatProvider):
    """Azure OpenAI's deployment endpoint through ``openai.AzureOpenAI``: the model is the deployment, in the path
    (``{base}/openai/deployments/{deployment}/chat/completions``); the version is a query parameter; the key goes in
    ``api-key`` (Azure's classic resource endpoint refuses a Bearer key)."""

    def _make_client(self) -> openai.AzureOpenAI:
        return openai.AzureOpenAI(api_key=self.config.api_key or (lambda: ""), azure_endpoint=self.config.base_url,
                                  api_version=self.config.api_version, max_retries=0, http_client=self.http)

    def _extra_headers(self) -> dict:
        return {} if self.config.api_key else {"api-key": openai.omit}

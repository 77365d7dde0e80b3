"""OpenAI-compatible Chat Completions (OpenAI, vLLM, Ollama, OpenRouter, LM Studio, Gemini's OpenAI endpoint).

Tool messages carry text only on most of these servers, so images a tool returned are shown to the model in a
user message placed right after the tool results they belong to.
"""

from __future__ import annotations

import json

from .base import Provider
from .http import ProviderError
from .messages import ImageInput, Message, ModelReply, ToolCall, Usage, parse_tool_arguments


def _image_part(image: ImageInput) -> dict:
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image.png_base64}"}}


def _content(text: str, images: list[ImageInput]) -> str | list[dict]:
    if not images:
        return text
    parts: list[dict] = [{"type": "text", "text": text}] if text else []
    return parts + [_image_part(image) for image in images]


def _tool_call_json(call: ToolCall) -> dict:
    arguments = call.raw_arguments if call.raw_arguments else json.dumps(call.arguments or {})
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


class OpenAIChatProvider(Provider):
    def _url(self) -> str:
        return f"{self.config.base_url}/chat/completions"

    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        return headers

    def _request_body(
        self, messages: list[Message], tools: list[dict], allow_tools: bool
    ) -> tuple[dict, int]:
        wire: list[dict] = []
        pending_images: list[ImageInput] = []
        images = 0

        def flush_tool_images() -> None:
            if pending_images:
                wire.append(
                    {
                        "role": "user",
                        "content": _content("Images returned by the tool calls above:", list(pending_images)),
                    }
                )
                pending_images.clear()

        for message in messages:
            if message.role != "tool":
                flush_tool_images()
            images += len(message.images)
            if message.role == "tool":
                wire.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text})
                pending_images.extend(message.images)
            elif message.role == "assistant":
                item: dict = {"role": "assistant", "content": message.text or None}
                if message.tool_calls:
                    item["tool_calls"] = [_tool_call_json(call) for call in message.tool_calls]
                wire.append(item)
            else:
                wire.append({"role": message.role, "content": _content(message.text, message.images)})
        flush_tool_images()
        body: dict = {"model": self.config.model, "messages": wire}
        body[self.config.token_limit_field] = self.config.max_tokens
        if self.config.temperature is not None:
            body["temperature"] = self.config.temperature
        if self.config.seed is not None:
            body["seed"] = self.config.seed
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t["name"],
                        "description": t.get("description", ""),
                        "parameters": t["parameters"],
                    },
                }
                for t in tools
            ]
            body["tool_choice"] = "auto" if allow_tools else "none"
        return body, images

    def _parse(self, response: dict) -> ModelReply:
        try:
            choice = response["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise ProviderError(f"unexpected chat completion shape: {json.dumps(response)[:300]}") from None
        content = message.get("content") or ""
        if isinstance(content, list):  # some servers return content parts
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        calls = []
        for index, raw_call in enumerate(message.get("tool_calls") or []):
            function = raw_call.get("function") or {}
            raw_arguments = function.get("arguments")
            arguments, error, repair = parse_tool_arguments(raw_arguments)
            calls.append(
                ToolCall(
                    id=raw_call.get("id") or f"call_{index}",
                    name=function.get("name") or "",
                    arguments=arguments,
                    raw_arguments=raw_arguments
                    if isinstance(raw_arguments, str)
                    else json.dumps(raw_arguments),
                    parse_error=error,
                    repair=repair,
                )
            )
        usage = response.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        output_details = usage.get("completion_tokens_details") or {}
        return ModelReply(
            text=content,
            tool_calls=calls,
            raw=message,
            usage=Usage(
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
                reasoning_tokens=int(output_details.get("reasoning_tokens") or 0),
                cache_read_tokens=int(details.get("cached_tokens") or 0),
            ),
            stop_reason=choice.get("finish_reason"),
        )

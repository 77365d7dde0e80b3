"""Gemini's native API (``POST {base}/v1beta/models/{model}:generateContent``, the key in ``x-goog-api-key``), and
the same body on Vertex AI (``{base}/v1/projects/{project}/locations/{region}/publishers/google/models/{model}``,
a Bearer access token), both through google-genai's client with the project's body and parsing
(:mod:`.genai_transport`).

- Tools go out as ``functionDeclarations`` in Gemini's OpenAPI schema subset (:func:`.tool_schemas.gemini_schema`);
  ``toolConfig.functionCallingConfig.mode`` is ``AUTO``, or ``NONE`` when the answer is due.
- A tool's result is a ``functionResponse`` part (``{"output": text}``, ``{"error": text}`` for a failed call) in
  the user turn after the call, carrying the call's ``id`` when the server gave one; the images it returned follow
  as ``inlineData`` parts of the same turn, after every response of the round.
- A model turn goes back as the parts the server sent (``thoughtSignature`` on them: Gemini 3 answers 400 to a
  function call of the current turn without its signature; thought parts; part kinds this module does not know),
  verbatim, while its text and calls are still the server's; when they were rewritten (calls written as text), the
  server's parts that are not text or calls, then ours, the first call with the documented stand-in signature.
- Turns of one role in a row are merged (function responses must answer their calls in one turn); empty turns and
  empty text parts are never sent.
- The reply is the candidate whose ``index`` is 0 (omitted in JSON when 0). ``finishReason`` is the stop reason in
  lower case: ``MAX_TOKENS`` is truncation; ``SAFETY``, ``RECITATION``, ``PROHIBITED_CONTENT`` and the other
  content filters, and a prompt refused whole (``promptFeedback.blockReason``, no candidate), are the model
  declining (:attr:`.ModelReply.refusal`); ``MALFORMED_FUNCTION_CALL`` leaves an empty reply, nudged once.
- Usage (``usageMetadata``): thought tokens are output (billed so) and its reasoning part; the implicitly or
  explicitly cached prefix is a part of the prompt count.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from google import genai

from .base import PREFLIGHT_TIMEOUT_S
from .genai_transport import ERRORS, PLACEHOLDER, Recorder, async_client_args
from .http import ProviderError
from .messages import ImageInput, Message, ModelReply, ReportedUsage, ToolCall, invalid_number
from .openai_chat import TOOL_IMAGES_TEXT
from .streaming import generate_content_response
from .tool_schemas import concise, gemini_schema
from .wires import SDKProvider

if TYPE_CHECKING:
    import httpx2

    from .config import ProviderConfig

OWN_PARTS = ("text", "functionCall")  # what the neutral message holds (a thought's text is not the answer)
REFUSED = frozenset({"SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY",
                     "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "MODEL_ARMOR"})
# ai.google.dev/gemini-api/docs/thought-signatures: what a function call the model did not make carries instead
UNSIGNED_CALL = "skip_thought_signature_validator"
VERSIONED = re.compile(r"/v1(alpha|beta)?\d*$")  # a --base-url that already names the API version


def _text(text: str) -> list[dict]:
    return [{"text": text}] if text else []


def _image(image: ImageInput) -> dict:
    return {"inlineData": {"mimeType": "image/png", "data": image.png_base64}}


def _own(part: dict) -> bool:
    """A part the neutral message holds: an answer's text or a call (a thought or anything else is the server's)."""
    return not part.get("thought") and any(key in part for key in OWN_PARTS)


def _said(parts: list[dict]) -> str:
    return "".join(part["text"] for part in parts if _own(part) and isinstance(part.get("text"), str))


def _model_parts(message: Message) -> list[dict]:
    """The parts of a model turn: the server's verbatim while the neutral text and calls are still theirs; calls
    the server did not send as calls (written as text, or from another provider's history) carry the documented
    stand-in signature on the first (Gemini 3 refuses a call of the current turn without one)."""
    calls = [{"functionCall": {"name": call.name, "args": call.arguments or {}}} for call in message.tool_calls]
    if calls:
        calls[0]["thoughtSignature"] = UNSIGNED_CALL
    vendor = message.vendor or {}
    parts = vendor.get("parts") if vendor.get("kind") == "gemini" else None
    if not parts:
        return _text(message.text) + calls
    names = [part["functionCall"].get("name") for part in parts if isinstance(part.get("functionCall"), dict)]
    if _said(parts) == message.text and names == [call.name for call in message.tool_calls]:
        return [part for part in parts if part.get("text") != "" or len(part) > 1]
    return [part for part in parts if not _own(part)] + _text(message.text) + calls


def _server_ids(messages: list[Message]) -> dict[str, str]:
    """Neutral call id -> the id the server gave the call (functionResponse must echo it; most replies have none)."""
    ids = {}
    for message in messages:
        for call in message.tool_calls:
            if call.vendor.get("id"):
                ids[call.id] = call.vendor["id"]
    return ids


def _response_part(message: Message, server_ids: dict[str, str]) -> dict:
    response = {"name": message.tool_name or "",
                "response": {"error" if message.is_error else "output": message.text or "(no output)"}}
    if message.tool_call_id in server_ids:
        response["id"] = server_ids[message.tool_call_id]
    return {"functionResponse": response}


class GeminiProvider(SDKProvider):
    """``POST {base}/v1beta/models/{model}:generateContent`` (``:streamGenerateContent?alt=sse`` streamed) through
    ``google.genai.Client`` (:mod:`.genai_transport`); the key in ``x-goog-api-key``."""

    sdk = ERRORS
    stream_format = "gemini"  # the body is the same streamed or not: only the method differs

    def __init__(self, config: ProviderConfig, http: httpx2.Client | None = None):
        super().__init__(config, http)
        self._call_numbers = itertools.count(1)  # Gemini's calls rarely carry ids: the episode's own, unique

    def _make_client(self) -> genai.Client:
        self._recorder = Recorder(self.http, keyless=not self.config.api_key)
        base = self.config.base_url
        version = VERSIONED.search(base)
        return genai.Client(api_key=self.config.api_key or "unused", http_options=genai.types.HttpOptions(
            base_url=base[:version.start()] if version else base,
            api_version=version.group(0)[1:] if version else "v1beta", httpx_client=self.http,
            async_client_args=async_client_args()))

    def _sdk_method(self) -> Callable:
        models = self.client.models
        return models.generate_content_stream if self.streaming() else models.generate_content

    def _post(self, body: dict, timeout: float) -> object:
        """One attempt: the SDK's method with ``body`` as its extra body (sent verbatim), the reply's bytes kept."""
        config = genai.types.GenerateContentConfig(
            http_options=genai.types.HttpOptions(extra_body=body, timeout=max(round(timeout * 1000), 1)),
            should_return_http_response=None if self.streaming() else True)  # the SDK refuses it when streaming
        call = functools.partial(self._sdk_method(), model=self.config.model.removeprefix("models/"),
                                 contents=PLACEHOLDER, config=config)
        return self._recorder.exchange((lambda: list(call())) if self.streaming() else call)

    def _fetch(self, url: str) -> httpx2.Response:
        """A GET with this provider's key (discovery, when a --server-profile asks for it)."""
        headers = {"x-goog-api-key": self.config.api_key} if self.config.api_key else {}
        return self.http.get(url, headers=headers, timeout=PREFLIGHT_TIMEOUT_S)

    def wire_tools(self, tools: list[dict]) -> list[dict]:
        if not tools:
            return []
        return [{"functionDeclarations": [
            {"name": tool["name"], "description": tool.get("description", ""),
             "parameters": gemini_schema(tool["parameters"])} for tool in concise(tools)]}]

    def _request_body(self, messages: list[Message], wire_tools: list[dict], allow_tools: bool) -> tuple[dict, int]:
        server_ids = _server_ids(messages)
        contents: list[dict] = []
        pending: list[ImageInput] = []  # images of the tool results just before, shown after all their responses
        images = 0

        def merge(role: str, parts: list[dict]) -> None:
            if not parts:
                return
            if contents and contents[-1]["role"] == role:  # one turn per role in a row
                contents[-1]["parts"].extend(parts)
            else:
                contents.append({"role": role, "parts": parts})

        def add(role: str, parts: list[dict]) -> None:
            """A turn, after the pending tool images unless it is one more response of their round."""
            if pending and not (role == "user" and parts and all("functionResponse" in part for part in parts)):
                merge("user", [{"text": TOOL_IMAGES_TEXT}, *map(_image, pending)])
                pending.clear()
            merge(role, parts)

        for message in messages:
            if message.role == "system":
                continue
            images += len(message.images)
            if message.role == "assistant":
                add("model", _model_parts(message))
            elif message.role == "tool":
                add("user", [_response_part(message, server_ids)])
                pending.extend(message.images)
            else:
                add("user", _text(message.text) + [_image(image) for image in message.images])
        add("user", [])
        generation: dict = {"maxOutputTokens": self.config.max_tokens, **self.sampling()}
        body: dict = {"contents": contents, "generationConfig": generation}
        system = "\n\n".join(message.text for message in messages if message.role == "system" and message.text)
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        if wire_tools:
            body["tools"] = wire_tools
            body["toolConfig"] = {"functionCallingConfig": {"mode": "AUTO" if allow_tools else "NONE"}}
        return body, images

    def _final_body(self, body: dict) -> dict:
        """The extra body merged one level deep: ``{"generationConfig": {"thinkingConfig": ...}}`` adds to the
        generation settings instead of replacing them."""
        extra = self.config.extra_body
        return {**body, **{key: {**body[key], **value} if isinstance(value, dict) and isinstance(body.get(key), dict)
                           else value for key, value in extra.items()}}

    def _parse(self, response: dict) -> ModelReply:
        if isinstance(response, list):  # a stream without alt=sse: a JSON array of the same chunks
            response = generate_content_response(response)
        candidates = response.get("candidates") or []
        if not isinstance(candidates, list):
            raise ProviderError(f"unexpected generateContent shape: {json.dumps(response)[:300]}")
        candidate = next((item for item in candidates if item.get("index", 0) == 0), None)
        blocked = (response.get("promptFeedback") or {}).get("blockReason")
        content = (candidate or {}).get("content") or {}
        parts = [part for part in content.get("parts") or [] if isinstance(part, dict)]
        finish = (candidate or {}).get("finishReason")
        calls = [self._call(part) for part in parts if isinstance(part.get("functionCall"), dict)]
        refusal = None
        if candidate is None and blocked:
            refusal = f"prompt blocked: {blocked}"
        elif finish in REFUSED:
            refusal = (candidate or {}).get("finishMessage") or finish
        return ModelReply(
            text=_said(parts),
            tool_calls=calls,
            raw=response,
            usage=self._usage(response.get("usageMetadata")),
            stop_reason=finish.lower() if isinstance(finish, str) else ("blocked" if blocked else None),
            reasoning="".join(part.get("text", "") for part in parts if part.get("thought")),
            vendor={"kind": "gemini", "parts": parts} if parts else None,
            refusal=refusal,
        )

    def _call(self, part: dict) -> ToolCall:
        call = part["functionCall"]
        arguments = call.get("args", {})
        error = None if isinstance(arguments, dict) else "function call args must be a JSON object"
        if error is None and invalid_number(arguments):
            error = f"function call args refused: {invalid_number(arguments)}"
        server_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
        return ToolCall(id=server_id or f"gemini_call_{next(self._call_numbers)}",
                        name=call.get("name") if isinstance(call.get("name"), str) else "",
                        arguments=None if error else arguments, raw_arguments=json.dumps(arguments),
                        parse_error=error, vendor={"id": server_id} if server_id else {})

    @staticmethod
    def _usage(reported: object):
        usage = ReportedUsage(reported)
        thoughts = usage.count("thoughtsTokenCount")
        return usage.usage_of(
            input_tokens=usage.count("promptTokenCount") + usage.count("toolUsePromptTokenCount"),
            output_tokens=usage.count("candidatesTokenCount") + thoughts,
            reasoning_tokens=thoughts,
            cache_read_tokens=usage.count("cachedContentTokenCount"),
        )


class GeminiVertexProvider(GeminiProvider):
    """The same body on Vertex AI (``{base}/v1/projects/{project}/locations/{region}/publishers/google/models/
    {model}:generateContent``) through ``google.genai.Client(vertexai=True)``: a Bearer access token from
    MEDOPENCLAW_API_KEY (``gcloud auth print-access-token``), else Application Default Credentials, which the SDK
    loads and refreshes."""

    def _make_client(self) -> genai.Client:
        from google.oauth2.credentials import Credentials  # google-auth: a dependency of google-genai

        self._recorder = Recorder(self.http, keyless=True)  # the token goes as Authorization, never as a key
        given = Credentials(self.config.api_key) if self.config.api_key else None  # else the SDK loads ADC
        return genai.Client(vertexai=True, project=self.config.project, location=self.config.region,
                            credentials=given, http_options=genai.types.HttpOptions(
                                base_url=self.config.base_url, api_version="v1", httpx_client=self.http,
                                async_client_args=async_client_args()))

    def _post(self, body: dict, timeout: float) -> object:
        import google.auth.exceptions  # google-auth: a dependency of google-genai

        try:
            return super()._post(body, timeout)
        except (google.auth.exceptions.GoogleAuthError, RuntimeError) as error:
            raise ProviderError(f"gemini-vertex has no Google credentials: set MEDOPENCLAW_API_KEY (gcloud auth "
                                f"print-access-token) or Application Default Credentials ({error})",
                                fatal=True) from None

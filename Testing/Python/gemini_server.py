"""A fake of Gemini's native API built from google-genai's own types, never kinder than the real one.

Every request is read by the SDK's models (``google.genai.types``: ``Content``, ``Tool``, ``ToolConfig``,
``GenerationConfig``; they forbid unknown fields, so a misspelt or unsupported field fails here as the API refuses
it) and replies are built from them (``GenerateContentResponse``, dumped the way the REST API writes them: camelCase,
bytes as base64). Documented rules enforced, with the API's error shape (``google.rpc.Status``):

- ai.google.dev/api/generate-content: ``x-goog-api-key`` (a wrong key: 400 INVALID_ARGUMENT, reason
  API_KEY_INVALID); roles ``user`` and ``model`` only; a content without parts is refused;
- ai.google.dev/gemini-api/docs/function-calling: function responses answer the calls of the model turn before
  them, one response per call ("the number of function response parts is equal to the number of function call
  parts"); the schema subset refuses ``additionalProperties`` (model_servers.py's gemini profile, same source);
- ai.google.dev/gemini-api/docs/thought-signatures: a function call the server signed must come back with its
  ``thoughtSignature`` (Gemini 3: 400 otherwise);
- ai.google.dev/gemini-api/docs/image-understanding: 20 MB per request of inline data, 3,600 images;
- streaming (``:streamGenerateContent?alt=sse``): one chunk per part, usage and the finish reason on the last;
  ``stream_only`` answers 404 to ``:generateContent`` as a gateway that only streams does.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable

import pydantic
from agents_fakes import FakeModelServer, Scripted
from google.genai import types
from sdk_types import adapter

MAX_REQUEST_BYTES = 20 * 1024 * 1024
MAX_IMAGES = 3600
UNSIGNED = base64.urlsafe_b64decode("skip_thought_signature_validator")  # the documented stand-in, as the SDK reads it
BODY_FIELDS = {"contents": list[types.Content], "systemInstruction": types.Content, "tools": list[types.Tool],
               "toolConfig": types.ToolConfig, "generationConfig": types.GenerationConfig,
               "safetySettings": list[types.SafetySetting], "cachedContent": str}
PATH = re.compile(r"(/v1beta|/v1/projects/[^/]+/locations/[^/]+/publishers/google)/models/([^/:]+):"
                  r"(generateContent|streamGenerateContent\?alt=sse)$")


class Refused(Exception):
    def __init__(self, message: str, status: int = 400, code: str = "INVALID_ARGUMENT", details: list | None = None):
        super().__init__(message)
        self.status, self.code, self.details = status, code, details or []

    def body(self) -> dict:
        return {"error": {"code": self.status, "message": str(self), "status": self.code, "details": self.details}}


def dump(response: types.GenerateContentResponse) -> dict:
    """A reply as the REST API writes it."""
    return response.model_dump(mode="json", by_alias=True, exclude_none=True)


def reply(parts: list[types.Part], finish: str = "STOP", usage: dict | None = None, index: int = 0,
          **fields) -> types.GenerateContentResponse:
    """A one-candidate reply of ``parts``."""
    return types.GenerateContentResponse(
        candidates=[types.Candidate(index=index, finish_reason=finish,
                                    content=types.Content(role="model", parts=parts) if parts else None)],
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            **(usage or {"prompt_token_count": 50, "candidates_token_count": 5, "total_token_count": 55})),
        **fields)


def validate(body: dict) -> dict:
    """The body read by the SDK's types: ``{field: model}``; raises :class:`Refused` as the API does."""
    unknown = set(body) - set(BODY_FIELDS)
    if unknown:
        raise Refused(f"Invalid JSON payload received. Unknown name {sorted(unknown)[0]!r}: Cannot find field.")
    read = {}
    for name, kind in BODY_FIELDS.items():
        if name in body:
            try:
                read[name] = adapter(kind).validate_json(json.dumps(body[name]))
            except pydantic.ValidationError as error:
                raise Refused(f"Invalid JSON payload received in {name}: {error.errors()[0]['msg']}") from None
    if "additionalProperties" in json.dumps(body.get("tools", [])):
        raise Refused("Invalid JSON payload received. Unknown name \"additionalProperties\" at "
                      "'tools[0].function_declarations[0].parameters': Cannot find field.")
    return read


class FakeGemini(FakeModelServer):
    """Serves ``answer(body) -> GenerateContentResponse | Refused`` after the checks above; records each request
    (path, headers, body) and the signatures it issued. ``key=None``: a server that wants no key (and gets none)."""

    def __init__(self, answer: Callable[[dict], types.GenerateContentResponse | Refused], key: str | None = "k-gemini",
                 stream_only: bool = False, bearer: bool = False):
        self.answer, self.key, self.stream_only, self.bearer = answer, key, stream_only, bearer
        self.signed: dict[str, bytes] = {}  # function name -> the signature its last call carried
        super().__init__([], handle=self.handle)

    def handle(self, request: dict) -> Scripted:
        try:
            answer = self.serve(request["path"], request["headers"], request["raw"], request["body"])
        except Refused as refused:
            return Scripted(refused.body(), refused.status)
        if request["path"].endswith("?alt=sse"):
            return Scripted([dump(chunk) for chunk in chunks(answer)])
        return Scripted(dump(answer))

    def serve(self, path: str, headers, raw: bytes, body: dict) -> types.GenerateContentResponse:
        match = PATH.search(path)
        if not match or (self.stream_only and match.group(3) == "generateContent"):
            raise Refused(f"Method not found: {path}", 404, "NOT_FOUND")
        sent = headers.get("Authorization", "").removeprefix("Bearer ") if self.bearer else \
            headers.get("x-goog-api-key")
        if sent != self.key:
            raise Refused("API key not valid. Please pass a valid API key.", details=[
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                 "domain": "googleapis.com"}])
        if len(raw) > MAX_REQUEST_BYTES:
            raise Refused(f"Request payload size exceeds the limit: {MAX_REQUEST_BYTES} bytes.")
        read = validate(body)
        self.check_turns(read.get("contents") or [])
        answer = self.answer(body)
        if isinstance(answer, Refused):
            raise answer
        for candidate in answer.candidates or []:
            for part in (candidate.content.parts if candidate.content else None) or []:
                if part.function_call and part.thought_signature:
                    self.signed[part.function_call.name] = part.thought_signature
        return answer

    def check_current_turn(self, contents: list[types.Content]) -> None:
        """Gemini 3: in the current turn (since the last user content that answers no call), the first function
        call of each model step carries a signature (the server's, or the documented stand-in)."""
        start = max((index for index, content in enumerate(contents) if content.role == "user" and
                     not any(part.function_response for part in content.parts)), default=0)
        for content in contents[start:]:
            first = next((part for part in content.parts if part.function_call), None)
            if content.role == "model" and first and not first.thought_signature:
                raise Refused(f"Function call `{first.function_call.name}` in the current turn is missing a "
                              "`thought_signature`.")

    def check_turns(self, contents: list[types.Content]) -> None:
        images, calls = 0, 0
        for content in contents:
            if content.role not in ("user", "model"):
                raise Refused(f"Please use a valid role: user, model (got {content.role}).")
            if not content.parts:
                raise Refused("contents.parts must not be empty.")
            responses = sum(part.function_response is not None for part in content.parts)
            if calls and responses != calls:
                raise Refused("Please ensure that the number of function response parts is equal to the number of "
                              "function call parts of the function call turn.")
            calls = sum(part.function_call is not None for part in content.parts) if content.role == "model" else 0
            for part in content.parts:
                images += part.inline_data is not None
                if part.text == "" and not part.thought_signature:
                    raise Refused("Unable to submit request because it has an empty text parameter.")
            first = next((part for part in content.parts if part.function_call), None)
            if content.role == "model" and first and first.function_call.name in self.signed and \
                    first.thought_signature not in (self.signed[first.function_call.name], UNSIGNED):
                raise Refused("Function call is missing a thought_signature in functionCall parts. This is required "
                              f"for tools to work correctly ({first.function_call.name}).")
        self.check_current_turn(contents)
        if images > MAX_IMAGES:
            raise Refused(f"The number of images in the request ({images}) exceeds the limit of {MAX_IMAGES}.")


def chunks(answer: types.GenerateContentResponse) -> list[types.GenerateContentResponse]:
    """How the streaming endpoint sends ``answer``: one chunk per part; the finish reason and usage on the last."""
    candidate = answer.candidates[0]
    parts = (candidate.content.parts if candidate.content else None) or []
    out = [types.GenerateContentResponse(candidates=[types.Candidate(
        index=candidate.index, content=types.Content(role="model", parts=[part]))]) for part in parts]
    last = types.GenerateContentResponse(candidates=[types.Candidate(
        index=candidate.index, finish_reason=candidate.finish_reason, content=types.Content(
            role="model", parts=[types.Part(text="")]))], usage_metadata=answer.usage_metadata,
        prompt_feedback=answer.prompt_feedback)
    return [*out, last]

"""The provider interface: one request of a neutral conversation to a model, one :class:`ModelReply` back."""

from __future__ import annotations

import io
import json
import logging
import re
import time
from abc import ABC, abstractmethod
from dataclasses import replace
from types import ModuleType

import httpx2

from ..core.redaction import redact_text
from .config import ProviderConfig, thinking_budget
from .conversation import ContextBudgetError, fit
from .discovery import reported_window
from .http import AUTH_STATUSES, RETRY_STATUSES, ProviderError, RetryPolicy, encoded_size, exchange_json
from .limits import CONTEXT_MARGIN
from .messages import ImageInput, Message, ModelReply
from .streaming import ASSEMBLERS, sse_events
from .text_calls import text_tool_calls
from .tool_schemas import drop_strict_nulls, strict_optional
from .transport import attempt, http_client

log = logging.getLogger(__name__)

PREFLIGHT_RETRY = RetryPolicy(max_retries=3, backoff_s=0.5, max_backoff_s=4.0, deadline_s=15.0)
PREFLIGHT_TIMEOUT_S = 10.0
REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-amzn-requestid")  # OpenAI, Anthropic, AWS
REFUSED_SHARE = 0.75  # after a refusal for length, prompts are held under this share of the refused one
PREFLIGHT_TOKENS = 256  # room for one short tool call (plus any thinking budget the request declares)
PREFLIGHT_TOOL = {
    "name": "report_colour",
    "description": "Report the colour of the square shown in the image.",
    "parameters": {"type": "object", "properties": {"colour": {"type": "string", "description": "one word"}},
                   "required": ["colour"], "additionalProperties": False},
}
PREFLIGHT_PROMPT = "The attached image is one coloured square. Call the tool report_colour with its colour."
# what servers answer a request with an image for a text-only model, or with tools when they have no tool calling
NO_IMAGES = re.compile(r"image|vision|multimodal|multi-modal|mmproj|content type|image_url", re.IGNORECASE)
NO_TOOLS = re.compile(r"tool|function", re.IGNORECASE)
UNSENDABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]|^\s|\s$")  # what no HTTP header value may hold (RFC 9110 §5.5)


def _drop_strict_nulls(calls: list, tools: list[dict]) -> None:
    """Strict mode makes the model send null for every optional argument it does not give: those nulls go (the
    registry would refuse them), recorded as a repair."""
    optional = strict_optional(tools)
    for call in calls:
        if isinstance(call.arguments, dict):
            kept = drop_strict_nulls(call.arguments, optional.get(call.name, frozenset()))
            if kept != call.arguments:
                call.arguments = kept
                call.repair = "; ".join(filter(None, (call.repair, "dropped the nulls strict mode sent for arguments")))


def preflight_image() -> ImageInput:
    """A 32 x 32 red square."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), (220, 20, 20)).save(buffer, format="PNG")
    return ImageInput.from_png(buffer.getvalue(), "preflight")


class Provider(ABC):
    """Translates the neutral conversation to a vendor's wire format and back; each request carries the view of the
    conversation that the policy and the server's limits allow, and goes out in one attempt at a time
    (:mod:`.wires`: the vendor's SDK client) under the project's one retry policy
    (``exchange_json``)."""

    sdk: ModuleType | None = None  # the vendor SDK whose client carries the requests (its exception classes)

    def __init__(self, config: ProviderConfig, http: httpx2.Client | None = None):
        self.config = config
        self.http = http or http_client()  # bounded replies (transport.py); an SDK client is handed it
        self.squeeze = 0  # refusals for length so far: each makes later requests of the episode more compact
        self._limits = config.limits()
        self._client: object | None = None

    def __getstate__(self) -> dict:
        """A provider pickles (the copilot's model calls run in a child process) without its connections: the
        child opens its own."""
        return {key: value for key, value in self.__dict__.items() if key not in ("http", "_client")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, http=http_client(), _client=None)

    def complete(self, messages: list[Message], tools: list[dict], allow_tools: bool = True) -> ModelReply:
        """Ask for the next turn. ``tools`` are neutral ``{name, description, parameters}`` dicts; with
        ``allow_tools=False`` they stay declared (history may reference them) but may not be called.

        A refusal for length compacts the conversation and retries once; a second one raises it (``length``), and
        the episode then asks for the answer without tools. Tool calls the model wrote as text are parsed."""
        wire_tools = self.wire_tools(tools)  # once: the budget measures what the body then carries
        while True:
            view, request = fit(messages, wire_tools, self._limits, self.config.max_tokens,
                                self.config.policy(), self.squeeze)
            body, images = self._request_body(view, wire_tools, allow_tools)
            body = self._final_body(body)
            request["bytes"] = encoded_size(body)
            limit = self._limits.max_request_bytes
            if limit is not None and request["bytes"] > limit:  # never sent: the server documents it refuses it
                raise ContextBudgetError(f"a request of {request['bytes']} bytes > {limit} ({self._limits.name}) "
                                         "after trimming")
            try:
                reply = self._send(body, images, self.config.timeout_s, self.config.retry)
            except ProviderError as error:
                if not error.length:
                    raise
                # the server's real window is smaller than assumed: hold later requests well under this one
                ceiling = int((self.config.max_tokens + request["tokens"] * REFUSED_SHARE) / (1 - CONTEXT_MARGIN))
                window = self._limits.context_window
                self._limits = replace(self._limits, context_window=min(window or ceiling, ceiling))
                self.squeeze += 1
                if self.squeeze > 1:
                    raise
                log.warning("the server refused a request for its length (%s); retrying on a compact context",
                            error)
                continue
            reply.request = {**request, **(reply.request or {})}
            if tools and not reply.tool_calls and reply.text:
                reply.tool_calls, reply.text = text_tool_calls(reply.text, {tool["name"] for tool in tools})
            if self._limits.schema_dialect == "openai-strict":
                _drop_strict_nulls(reply.tool_calls, tools)
            return reply

    def preflight(self) -> str | None:
        """One small request before a run starts workers, proving the server can run the benchmark: one image and
        one tool, which the model must call. Raises a fatal :class:`ProviderError` with one line for a wrong key,
        URL or model, a text-only model, a server without tool calling; returns a warning when the server is
        merely busy (429/5xx, which the episodes' retries absorb) or when the call came back as text."""
        if not self.config.api_key and self.config.provider_kind.auth == "key" and self.config.vendor_url():
            raise ProviderError(f"no API key for {self.config.base_url}: set {self.config.key_hint()}", fatal=True)
        warnings = []
        if self._limits.discover and self.config.context_window is None:
            warnings += self._discover_limits()
        budget = thinking_budget(self.config.extra_body)
        floor = 1024 if self.config.token_limit_field == "max_completion_tokens" else PREFLIGHT_TOKENS
        config = replace(self.config, max_tokens=min(self.config.max_tokens, floor) + budget)
        body, images = type(self)(config, self.http)._request_body(
            [Message("user", PREFLIGHT_PROMPT, images=[preflight_image()])], self.wire_tools([PREFLIGHT_TOOL]), True)
        try:
            reply = self._send(self._final_body(body), images, PREFLIGHT_TIMEOUT_S, PREFLIGHT_RETRY,
                               logging.DEBUG)
        except ProviderError as error:
            if error.status in RETRY_STATUSES:
                return f"model pre-flight: the server is busy ({error}); starting anyway"
            raise ProviderError(self._preflight_refusal(error), error.status, error.retryable, fatal=True) from None
        if not reply.tool_calls:
            reply.tool_calls, _ = text_tool_calls(reply.text, {PREFLIGHT_TOOL["name"]})
            if not reply.tool_calls:
                raise ProviderError(
                    f"{self.config.model} answered without calling the offered tool: this server "
                    "or model has no tool calling (vLLM needs --enable-auto-tool-choice --tool-call-parser, "
                    "llama.cpp --jinja); the benchmark needs it", fatal=True)
            warnings.append("the model wrote its tool call as text (the server has no tool-call parser): such "
                            "calls are executed and counted as protocol deviations")
        # printed and logged like a ProviderError's message, so redacted the same way (the base URL's userinfo)
        return redact_text("; ".join(f"model pre-flight: {warning}" for warning in warnings),
                           (self.config.api_key or "",)) or None

    def _preflight_refusal(self, error: ProviderError) -> str:
        """One line saying why the server cannot run the benchmark."""
        text = str(error)
        if error.status in AUTH_STATUSES and not self.config.api_key:
            return f"{text} (no API key was sent: set {self.config.key_hint()})"
        if error.status is not None and 400 <= error.status < 500 and not error.fatal:
            if NO_IMAGES.search(text.split(":", 2)[-1]):
                return f"{self.config.model} does not accept images (a text-only model?): {text}"
            if NO_TOOLS.search(text.split(":", 2)[-1]):
                return f"the server does not accept tools (no tool calling): {text}"
        return text

    def _discover_limits(self) -> list[str]:
        """Take the window the server reports (:mod:`.discovery`); without one, say in one line what is assumed."""
        found = reported_window(self._get, self.config.base_url, self.config.model)
        if found and found[0] > self.config.max_tokens:
            self.config.context_window = found[0]
            self._limits = self.config.limits()
            return []
        limits = self._limits
        images = f"{limits.max_images} images" if limits.max_images else "no image limit"
        return [f"{self.config.base_url} reports no context window for {self.config.model}: assuming "
                f"{limits.context_window} tokens and {images} per request (the {limits.name} profile); set "
                "--context-window / --server-profile if the server allows more"]

    def _send(self, body: dict, images: int, timeout_s: float, retry: RetryPolicy,
              retry_log_level: int = logging.WARNING) -> ModelReply:
        if self.config.api_key and UNSENDABLE.search(self.config.api_key):
            raise ProviderError("the API key holds a line break, a control character or surrounding spaces: it "
                                "cannot go in a header (check how it was copied)", fatal=True)
        started = time.perf_counter()
        response, retries, exchange = exchange_json(
            lambda timeout: attempt(self.sdk, lambda: self._post(body, timeout), timeout),
            body,
            timeout_s=timeout_s,
            retry=retry,
            secrets=(self.config.api_key,),
            retry_log_level=retry_log_level,
            assemble=self._assemble if self.streaming() else None,
        )
        try:
            reply = self._parse(response)
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as error:
            # a server speaking a near-miss dialect must end the episode in error, not crash the batch run
            raise ProviderError(f"unexpected response shape ({type(error).__name__}: {error}): "
                                f"{json.dumps(response, default=str)[:300]}") from None
        reply.usage.calls = 1
        reply.usage.images_sent = images
        reply.usage.retries = retries
        reply.usage.model_seconds = time.perf_counter() - started
        reply.request = self._exchanged(exchange)
        if self.config.price is not None:
            reply.usage.cost_usd = self.config.price.cost(reply.usage)
        return reply

    def sampling(self) -> dict:
        """The sampling parameters given (``--temperature``, ``--seed``) that this API takes; the others are
        never sent (servers answer 400 to parameters they do not know, e.g. LiteLLM's UnsupportedParamsError)."""
        given = {"temperature": self.config.temperature, "seed": self.config.seed}
        for name in sorted(key for key, value in given.items() if value is not None
                           and key not in self.config.provider_kind.takes):
            log.info("the %s API has no %s parameter; %s is not sent", self.config.kind, name, given[name])
        return {key: value for key, value in given.items()
                if value is not None and key in self.config.provider_kind.takes}

    def _get(self, url: str) -> httpx2.Response:
        """A GET of ``url`` (absolute) as this provider authenticates, one attempt (discovery)."""
        return attempt(self.sdk, lambda: self._fetch(url), PREFLIGHT_TIMEOUT_S)

    def _events(self, response: httpx2.Response) -> list[dict]:
        """The events of a streamed reply, in order (this wire's server-sent events)."""
        return sse_events(response.text)

    def _assemble(self, response: httpx2.Response) -> dict:
        return ASSEMBLERS[self.stream_format](self._events(response))

    @staticmethod
    def _exchanged(response: httpx2.Response) -> dict:
        """What went over the wire, for the trace: where (credentials redacted), the status, the server's request
        id, and the bytes each way as sent (an SDK's compact UTF-8 JSON) and received."""
        request_id = next((response.headers[name] for name in REQUEST_ID_HEADERS if name in response.headers), None)
        return {"url": redact_text(str(response.request.url)), "status": response.status_code,
                "request_id": request_id, "sent_bytes": len(response.request.content),
                "received_bytes": len(response.content)}

    stream_format = ""  # streaming.ASSEMBLERS key of this wire's server-sent events
    stream_fields: dict = {}  # what a request adds to be streamed

    def streaming(self) -> bool:
        """``--stream`` when given, else the vendor's rule: its kind streams above a ``max_tokens`` it declares."""
        if self.config.stream is not None:
            return self.config.stream
        above = self.config.provider_kind.stream_above
        return above is not None and self.config.max_tokens > above

    def _final_body(self, body: dict) -> dict:
        """The wire body with the server-specific fields merged in, and streamed when :meth:`streaming`."""
        body = self.config.request_body(body)
        return {**body, **self.stream_fields} if self.streaming() else body

    @abstractmethod
    def _post(self, body: dict, timeout: float) -> object:
        """One attempt of sending ``body``, without retries: an SDK call's raw response or an ``httpx2.Response``
        (:func:`.transport.attempt` reads it and maps its failures)."""

    @abstractmethod
    def _fetch(self, url: str) -> object:
        """One GET of ``url`` with this provider's authentication (discovery), as :meth:`_post` answers."""

    @abstractmethod
    def wire_tools(self, tools: list[dict]) -> list[dict]:
        """Neutral tools as this server reads them in a request (:func:`.tool_schemas.concise`, its dialect)."""

    @abstractmethod
    def _request_body(
        self, messages: list[Message], wire_tools: list[dict], allow_tools: bool
    ) -> tuple[dict, int]:
        """The JSON body and the number of images it carries; ``wire_tools`` as :meth:`wire_tools` gave them."""

    @abstractmethod
    def _parse(self, response: dict) -> ModelReply: ...

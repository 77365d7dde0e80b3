"""The requests of every provider under one policy: per-call timeout, retries with backoff, error classes, key
scrubbing (each attempt goes through the vendor's SDK, :mod:`.transport`).

Three kinds of failure, because a batch run must react differently to each:

- *transient* -- rate limits (429), overload (5xx, Anthropic's 529), timeouts, refused or dropped connections:
  retried with exponential backoff and jitter, honouring ``Retry-After`` (or a Google ``RetryInfo`` in the
  error body), all within one total deadline;
- *fatal* -- a rejected key (401/403; Gemini's 400 API_KEY_INVALID) or an unknown model/endpoint (404, or a 400 that
  says the model does not exist): no episode of the run can succeed, so the run stops with one clear line;
- *too long* -- a 413, or a 4xx (or llama.cpp's 500) saying the request exceeds the context window, the
  images per request or the request size: the episode compacts its conversation, then answers without tools
  (the model's outcome ``model_length``, scored), never a harness error;
- anything else (another 4xx, a body that is not JSON): deterministic for this request -- the episode is
  *rejected* (final after its attempt, recorded with the provider's own message, not re-run by a resume).
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx2

from ..core.redaction import redact_text
from .messages import loads_bounded
from .transport import TransportFailure

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
AUTH_STATUSES = frozenset({401, 403})
# Gemini refuses a wrong key with a 400 INVALID_ARGUMENT whose ErrorInfo reason is API_KEY_INVALID
INVALID_KEY = re.compile(r"API key not valid|API_KEY_INVALID")
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
MAX_RESPONSE_DEPTH = 64  # a reply's envelope is ~8 levels; tool input objects are bounded at 32 below that
# streamed replies: server-sent events, and Bedrock's binary AWS event stream
STREAM_TYPES = ("text/event-stream", "application/vnd.amazon.eventstream")
UNKNOWN_MODEL = re.compile(
    r"model[^.]{0,120}\b(not found|does not exist|not exist|is not a valid)"
    r"|(unknown|invalid|no such|not a valid) model|model_not_found",
    re.IGNORECASE,
)
# vLLM "maximum context length is N tokens", llama.cpp exceed_context_size_error / "Context size has been exceeded",
# OpenAI context_length_exceeded, Anthropic "prompt is too long" / 413 request_too_large / image-count and
# many-image dimension errors, Gemini "exceeds the maximum number of tokens" / payload size, Mistral "too large"
LENGTH_ERROR = re.compile(
    r"context[ _](length|window|size)|maximum context|max_model_len|prompt is too long|too many (images|tokens)"
    r"|request_too_large|request too large|too large|payload size|exceeds? (the )?(available|maximum)"
    r"|many-image|dimensions? exceed|images? (and documents )?(exceed|limit)|maximum number of (tokens|images)",
    re.IGNORECASE,
)


class ProviderError(Exception):
    """A model call that failed for good; ``status`` is the last HTTP status (None for network failures).

    ``retryable``: the failure was transient (running the episode again later may succeed);
    ``fatal``: no request of this run can succeed (key, URL or model is wrong) -- stop the run.
    """

    def __init__(self, message: str, status: int | None = None, retryable: bool = False, fatal: bool = False,
                 length: bool = False):
        super().__init__(redact_text(message))  # URLs in it lose their credentials and secret parameters
        self.status = status
        self.retryable = retryable
        self.fatal = fatal
        self.length = length  # the request was too long for the server: a model outcome, see the module doc

    def to_json(self) -> dict:
        return {"message": str(self), "status": self.status, "retryable": self.retryable, "fatal": self.fatal,
                "length": self.length}


def encoded_size(value: object) -> int:
    """Bytes of ``value`` in a request body, at most: ``json.dumps`` escapes every non-ASCII character (6 bytes for
    most, 12 for one outside the BMP such as an emoji) and spaces its separators, while the SDKs send compact UTF-8,
    never longer. Request budgets are measured with this, never with character counts."""
    return len(json.dumps(value))


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds to wait: delta-seconds or an HTTP-date (RFC 9110 §10.2.3); None if absent."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(moment.timestamp() - (time.time() if now is None else now), 0.0)


@dataclass
class RetryPolicy:
    """Exponential backoff with jitter; ``deadline_s`` bounds the whole call, retries and waits included."""

    max_retries: int = 6
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    deadline_s: float = 300.0

    def delay(self, attempt: int, retry_after: str | None) -> float:
        asked = retry_after_seconds(retry_after)
        if asked is not None:
            return asked  # the server knows best; the deadline still bounds it
        base = min(self.backoff_s * (2**attempt), self.max_backoff_s)
        return base * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not cryptography


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` fit for a log, an exception or a trace: every secret removed by the one redaction
    (:func:`..redaction.redact_text`: the key itself, URL credentials and secret query parameters, ...)."""
    return redact_text(text, secrets)


def provider_message(text: str) -> str:
    """The provider's own explanation in an error body: ``error.message`` (OpenAI, Anthropic, vLLM), ``error`` or
    ``detail`` (Ollama, FastAPI servers), else the start of the body."""
    try:
        body = loads_bounded(text, MAX_RESPONSE_DEPTH, strict=False)
    except ValueError:
        return text[:500].strip()
    if isinstance(body, dict):
        error = body.get("error", body.get("detail"))
        if isinstance(error, dict):
            error = error.get("message") or json.dumps(error)
        if isinstance(error, str) and error:
            return error[:500]
    return json.dumps(body)[:500]


def retry_info(text: str) -> str | None:
    """The wait a ``google.rpc.Status`` error body asks for (Gemini, Vertex AI: 429 RESOURCE_EXHAUSTED with a
    ``RetryInfo`` detail, ``"retryDelay": "37s"``), as ``Retry-After`` delta-seconds; None without one."""
    try:
        body = loads_bounded(text, MAX_RESPONSE_DEPTH, strict=False)
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else []:
        delay = detail.get("retryDelay") if isinstance(detail, dict) and detail.get("@type") == RETRY_INFO else None
        if isinstance(delay, str) and re.fullmatch(r"\d+(\.\d+)?s", delay):
            return delay[:-1]
    return None


def too_long(status: int, message: str) -> bool:
    """The server refused the request for its size (see the module docstring)."""
    return status == 413 or (400 <= status < 600 and status not in (429, 529) and bool(LENGTH_ERROR.search(message)))


def classify(status: int, message: str) -> tuple[bool, bool, str]:
    """``(retryable, fatal, what)`` for an HTTP error status and the provider's message."""
    if too_long(status, message):
        return False, False, f"request too long for the server (HTTP {status})"
    if status in RETRY_STATUSES:
        return True, False, f"HTTP {status}"
    if status in AUTH_STATUSES or (status == 400 and INVALID_KEY.search(message)):
        return False, True, f"the API key was refused (HTTP {status})"
    if status == 404 or (status in (400, 422) and UNKNOWN_MODEL.search(message)):
        return False, True, f"unknown model or endpoint (HTTP {status}): check --model and --base-url"
    return False, False, f"request rejected (HTTP {status})"


def reply_json(response: httpx2.Response, assemble: Callable[[httpx2.Response], dict] | None) -> dict:
    """A successful reply's body: JSON, or the events of a streamed reply assembled by ``assemble``."""
    if assemble is not None and response.headers.get("content-type", "").startswith(STREAM_TYPES):
        return assemble(response)
    return loads_bounded(response.text, MAX_RESPONSE_DEPTH, strict=False)


def exchange_json(
    send: Callable[[float], httpx2.Response],
    body: dict,
    timeout_s: float,
    retry: RetryPolicy,
    secrets: tuple[str, ...] = (),
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    retry_log_level: int = logging.WARNING,
    assemble: Callable[[httpx2.Response], dict] | None = None,
) -> tuple[dict, int, httpx2.Response]:
    """Send ``body`` with ``send(timeout)`` (one attempt through a vendor SDK, :func:`.transport.attempt`) under
    the one retry policy; return ``(json_response, retries_used, http_response)`` or raise :class:`ProviderError`.
    Each retry is logged at ``retry_log_level``. ``assemble`` turns a streamed reply into the reply the request
    would have had without streaming (:mod:`.streaming`)."""
    try:
        json.dumps(body, allow_nan=False)
    except ValueError as error:
        raise ProviderError(f"the request body is not valid JSON: {error}") from None
    started = clock()
    attempt = 0
    url = ""
    while True:
        status = None
        retry_after = None
        fatal = length = False
        remaining = retry.deadline_s - (clock() - started)
        try:
            response = send(min(timeout_s, max(remaining, 0.5)))
            url, status = str(response.request.url), response.status_code
            if status < 400:
                return reply_json(response, assemble), attempt, response
            retry_after = response.headers.get("retry-after") or retry_info(response.text)
            explanation = provider_message(response.text)
            length = too_long(status, explanation)
            retryable, fatal, what = classify(status, explanation)
            message = f"{what}: {scrub(explanation, secrets)}"
        except TransportFailure as failure:
            url, message, retryable = failure.url, scrub(str(failure), secrets), failure.retryable
        except ValueError as error:  # too large, not JSON, or nested too deep to parse safely
            where = getattr(error, "url", None) or url
            raise ProviderError(f"{scrub(where, secrets)}: response refused ({error})", status) from None
        where = scrub(url, secrets)
        if not retryable or attempt >= retry.max_retries:
            raise ProviderError(f"{where}: {message} (after {attempt + 1} attempts)", status, retryable, fatal, length)
        delay = retry.delay(attempt, retry_after)
        elapsed = clock() - started
        if elapsed + delay > retry.deadline_s:
            raise ProviderError(
                f"{where}: {message} (gave up after {attempt + 1} attempts: waiting {delay:.1f} s more would "
                f"pass the {retry.deadline_s:g} s retry deadline)",
                status,
                retryable,
            )
        log.log(retry_log_level, "model call failed (%s); retry %d in %.1f s", message, attempt + 1, delay)
        sleep(delay)
        attempt += 1

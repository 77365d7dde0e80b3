"""HTTP transport shared by the providers: per-call timeout, retries with backoff, and key scrubbing.

Rate limits (429), overload (5xx, Anthropic's 529) and timeouts are transient in practice, so they are
retried with exponential backoff (honouring ``Retry-After``); other 4xx errors are the request's fault and
fail at once.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import requests

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


class ProviderError(Exception):
    """A model call that failed for good; ``status`` is the last HTTP status (None for network failures)."""

    def __init__(self, message: str, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable


@dataclass
class RetryPolicy:
    max_retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0

    def delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), self.max_backoff_s)
            except ValueError:
                pass  # an HTTP-date: fall back to our own schedule
        base = min(self.backoff_s * (2**attempt), self.max_backoff_s)
        return base * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not cryptography


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """Remove every secret from text that may reach a log, an exception or a trace.

    The stripped form is removed too: a key read from a file often ends in a newline, and error messages
    quote it escaped (``'...\\n'``), so the raw form alone would not match.
    """
    for secret in secrets:
        for form in (secret, secret.strip()):
            if form:
                text = text.replace(form, "[redacted]")
    return text


def post_json(
    session: requests.Session,
    url: str,
    headers: dict,
    body: dict,
    timeout_s: float,
    retry: RetryPolicy,
    secrets: tuple[str, ...] = (),
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[dict, int]:
    """POST ``body``; return ``(json_response, retries_used)`` or raise :class:`ProviderError`."""
    attempt = 0
    while True:
        status = None
        retry_after = None
        try:
            response = session.post(url, headers=headers, json=body, timeout=timeout_s)
            status = response.status_code
            if status < 400:
                try:
                    return response.json(), attempt
                except ValueError as error:
                    raise ProviderError(f"{url}: response is not JSON ({error})", status) from None
            retry_after = response.headers.get("retry-after")
            message = f"HTTP {status}: {scrub(response.text[:500], secrets)}"
            retryable = status in RETRY_STATUSES
        except requests.Timeout:
            message, retryable = f"no response within {timeout_s:g} s", True
        except requests.ConnectionError as error:
            message, retryable = f"connection failed: {scrub(str(error), secrets)}", True
        except requests.RequestException as error:
            # a body cut off mid-stream is transient; a bad URL or header (e.g. a key with a newline, whose
            # message quotes the key) is not, and must still end as a scrubbed ProviderError, never a crash
            retryable = isinstance(error, requests.exceptions.ChunkedEncodingError)
            message = f"request failed: {type(error).__name__}: {scrub(str(error), secrets)}"
        if not retryable or attempt >= retry.max_retries:
            raise ProviderError(
                f"{scrub(url, secrets)}: {message} (after {attempt + 1} attempts)", status, retryable
            )
        delay = retry.delay(attempt, retry_after)
        log.warning("model call failed (%s); retry %d in %.1f s", message, attempt + 1, delay)
        sleep(delay)
        attempt += 1

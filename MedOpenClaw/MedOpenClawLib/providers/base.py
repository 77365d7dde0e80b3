"""The provider interface: one request of a neutral conversation to a model, one :class:`ModelReply` back."""

from __future__ import annotations

import json
import logging
import time
from abc import ABC, abstractmethod
from dataclasses import replace

import requests

from .config import DEFAULT_BASE_URLS, ProviderConfig, key_hint
from .http import AUTH_STATUSES, RETRY_STATUSES, ProviderError, RetryPolicy, post_json
from .messages import Message, ModelReply

PREFLIGHT_RETRY = RetryPolicy(max_retries=3, backoff_s=0.5, max_backoff_s=4.0, deadline_s=15.0)
PREFLIGHT_TIMEOUT_S = 10.0


class Provider(ABC):
    """Translates the neutral conversation to a vendor's wire format and back (retries: ``post_json``)."""

    def __init__(self, config: ProviderConfig, session: requests.Session | None = None):
        self.config = config
        self.session = session or requests.Session()

    def complete(self, messages: list[Message], tools: list[dict], allow_tools: bool = True) -> ModelReply:
        """Ask for the next turn. ``tools`` are neutral ``{name, description, parameters}`` dicts; with
        ``allow_tools=False`` they stay declared (history may reference them) but may not be called."""
        body, images = self._request_body(messages, tools, allow_tools)
        return self._send(self.config.request_body(body), images, self.config.timeout_s, self.config.retry)

    def preflight(self) -> str | None:
        """One tiny request before a run starts workers, so a wrong key, URL or model fails in seconds rather
        than in every episode: raises a fatal :class:`ProviderError` for those (and for a rejected request);
        returns a warning when the server is merely busy (429/5xx), which the episodes' retries absorb."""
        if not self.config.api_key and self.config.base_url in DEFAULT_BASE_URLS.values():
            raise ProviderError(f"no API key for {self.config.base_url}: set "
                                f"{key_hint(self.config.kind, self.config.base_url)}", fatal=True)
        config = replace(self.config, max_tokens=1 if self.config.token_limit_field == "max_tokens" else 16)
        body, images = type(self)(config, self.session)._request_body([Message("user", "Reply with OK.")], [], True)
        try:
            self._send(self.config.request_body(body), images, PREFLIGHT_TIMEOUT_S, PREFLIGHT_RETRY, logging.DEBUG)
        except ProviderError as error:
            if error.status in RETRY_STATUSES:
                return f"model pre-flight: the server is busy ({error}); starting anyway"
            unkeyed = error.status in AUTH_STATUSES and not self.config.api_key
            hint = f" (no API key was sent: set {key_hint(self.config.kind, self.config.base_url)})" if unkeyed else ""
            raise ProviderError(f"{error}{hint}", error.status, error.retryable, fatal=True) from None
        return None

    def _send(self, body: dict, images: int, timeout_s: float, retry: RetryPolicy,
              retry_log_level: int = logging.WARNING) -> ModelReply:
        started = time.perf_counter()
        response, retries = post_json(
            self.session,
            self._url(),
            self._headers(),
            body,
            timeout_s=timeout_s,
            retry=retry,
            secrets=(self.config.api_key,),
            retry_log_level=retry_log_level,
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
        if self.config.price is not None:
            reply.usage.cost_usd = self.config.price.cost(reply.usage)
        return reply

    @abstractmethod
    def _url(self) -> str: ...

    @abstractmethod
    def _headers(self) -> dict: ...

    @abstractmethod
    def _request_body(
        self, messages: list[Message], tools: list[dict], allow_tools: bool
    ) -> tuple[dict, int]:
        """The JSON body and the number of images it carries."""

    @abstractmethod
    def _parse(self, response: dict) -> ModelReply: ...

"""The provider interface: one request of a neutral conversation to a model, one :class:`ModelReply` back."""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod

import requests

from .config import ProviderConfig
from .http import ProviderError, post_json
from .messages import Message, ModelReply


class Provider(ABC):
    """Translates the neutral conversation to a vendor's wire format and back (retries: ``post_json``)."""

    def __init__(self, config: ProviderConfig, session: requests.Session | None = None):
        self.config = config
        self.session = session or requests.Session()

    def complete(self, messages: list[Message], tools: list[dict], allow_tools: bool = True) -> ModelReply:
        """Ask for the next turn. ``tools`` are neutral ``{name, description, parameters}`` dicts; with
        ``allow_tools=False`` they stay declared (history may reference them) but may not be called."""
        body, images = self._request_body(messages, tools, allow_tools)
        started = time.perf_counter()
        response, retries = post_json(
            self.session,
            self._url(),
            self._headers(),
            body,
            timeout_s=self.config.timeout_s,
            retry=self.config.retry,
            secrets=(self.config.api_key,),
        )
        try:
            reply = self._parse(response)
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as error:
            # a server speaking a near-miss dialect must end the episode INVALID, not crash the batch run
            raise ProviderError(f"unexpected response shape ({type(error).__name__}: {error}): "
                                f"{json.dumps(response, default=str)[:300]}") from None
        reply.usage.calls = 1
        reply.usage.images_sent = images
        reply.usage.retries = retries
        reply.usage.model_seconds = time.perf_counter() - started
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

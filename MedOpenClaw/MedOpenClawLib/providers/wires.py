"""How one attempt of a request goes out: through the vendor's own SDK client (:class:`SDKProvider`: openai,
anthropic and their cloud clients; google-genai's through :mod:`.genai_transport`), on the provider's bounded HTTP
client. The project's retry policy, error classes and parsing of the raw bytes (:mod:`.base`, :mod:`.http`) are
the same for all."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable

import httpx2

from .base import PREFLIGHT_TIMEOUT_S, Provider
from .transport import keywords


class SDKProvider(Provider):
    """A surface spoken by a vendor SDK client (``sdk``): it builds the URL, authenticates and serialises; its own
    retries are off (``max_retries=0``) and its HTTP client is the provider's bounded one."""

    @property
    def client(self) -> object:
        """The SDK client for this endpoint, made on first use (the cloud ones read credentials)."""
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def _post(self, body: dict, timeout: float) -> object:
        method = self._sdk_method()
        return method(**keywords(method, body), timeout=timeout, extra_headers=self._extra_headers())

    def _fetch(self, url: str) -> httpx2.Response:
        return self.client.get(url, cast_to=httpx2.Response,
                               options={"timeout": PREFLIGHT_TIMEOUT_S, "headers": self._extra_headers()})

    def _extra_headers(self) -> dict:
        """Per-request headers: without a key, the SDK's authentication header is left out (a local server needs
        none; the SDKs refuse to send a request without one unless told)."""
        return {} if self.config.api_key else {"Authorization": self.sdk.omit}

    @abstractmethod
    def _make_client(self) -> object:
        """The SDK client: this endpoint, ``max_retries=0`` (the retry policy is the project's), ``self.http``."""

    @abstractmethod
    def _sdk_method(self) -> Callable:
        """The SDK method of this surface, ``with_raw_response`` (the project parses the bytes)."""


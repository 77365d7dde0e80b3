"""The vendors' SDK clients as the wire: one attempt of one request, its raw HTTP exchange kept.

The ``openai`` and ``anthropic`` SDKs build each surface's URL, authentication and serialisation (Azure's deployment
path and ``api-key``, Bedrock's SigV4 and its binary event stream, Vertex's ``rawPredict`` and Google credentials).
What stays the project's sits around them: one retry policy for every provider (:func:`.http.exchange_json`; the
SDKs' own retries are off, ``max_retries=0``), the error classes, a size ceiling on every reply body (enforced here,
in the HTTP client each SDK client is given, before the SDK reads a byte), and the raw bytes of each reply, parsed by
the project so that fields no SDK type declares still round-trip verbatim.
"""

from __future__ import annotations

import inspect
import os
import ssl
from collections.abc import Callable, Iterator
from functools import cache
from types import ModuleType

import httpx2

# a reply body larger than this is refused unread: 128k output tokens are ~0.5 MB of text (3 MB with every
# character JSON-escaped), so only a hostile or broken server sends more, and every parse of it costs time
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
SDK_KEYWORDS = ("extra_headers", "extra_query", "extra_body", "timeout")  # the SDK's own, never API fields
# failures of the request itself, not of the network: sending it again cannot help
NOT_TRANSIENT = (httpx2.LocalProtocolError, httpx2.UnsupportedProtocol, httpx2.ProxyError, httpx2.DecodingError,
                 httpx2.TooManyRedirects)


class ResponseTooLarge(ValueError):
    """A response body over :data:`MAX_RESPONSE_BYTES` from ``url``."""

    def __init__(self, url: str, limit: int):
        super().__init__(f"a response of more than {limit} bytes")
        self.url = url


class TransportFailure(Exception):
    """An attempt that got no HTTP answer: ``retryable`` when the network may do better next time."""

    def __init__(self, url: str, message: str, retryable: bool):
        super().__init__(message)
        self.url = url
        self.retryable = retryable


class _BoundedStream(httpx2.SyncByteStream):
    """A response body that raises :class:`ResponseTooLarge` past ``limit`` bytes instead of being read further."""

    def __init__(self, stream: httpx2.SyncByteStream, limit: int, url: str):
        self._stream = stream
        self._limit = limit
        self._url = url

    def __iter__(self) -> Iterator[bytes]:
        size = 0
        for chunk in self._stream:
            size += len(chunk)
            if size > self._limit:
                raise ResponseTooLarge(self._url, self._limit)
            yield chunk

    def close(self) -> None:
        self._stream.close()


def tls_context() -> ssl.SSLContext:
    """The verifying TLS context of every provider connection, one per process (per ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR`` in effect): making one reads the whole CA store, ~50 ms of CPU, which each episode's provider
    paid again (google-genai's client three times more). Every transport given it speaks HTTP/1.1 only, the ALPN
    list httpcore sets on it for each connection."""
    return _tls_context((os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")))


@cache
def _tls_context(trust: tuple[str | None, str | None]) -> ssl.SSLContext:
    """httpx's default context (which reads ``trust``, the two variables, itself)."""
    return httpx2.create_ssl_context()


class BoundedTransport(httpx2.BaseTransport):
    """The HTTP transport every SDK client is given: error bodies and streams are bounded as replies are (the SDKs
    read an error body whole before raising)."""

    def __init__(self, limit: int = MAX_RESPONSE_BYTES):
        self._inner = httpx2.HTTPTransport(verify=tls_context())
        self._limit = limit

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = self._inner.handle_request(request)
        response.stream = _BoundedStream(response.stream, self._limit, str(request.url))
        return response

    def close(self) -> None:
        self._inner.close()


def http_client() -> httpx2.Client:
    """One connection pool per provider, shared by its SDK client and by discovery."""
    return httpx2.Client(transport=BoundedTransport())


@cache
def _parameters(method: Callable) -> frozenset[str]:
    return frozenset(inspect.signature(method).parameters) - set(SDK_KEYWORDS)


def keywords(method: Callable, body: dict) -> dict:
    """``body`` as an SDK method takes it: the API's fields it declares as keywords, every other field (a server's
    own, ``--extra-body``'s) in ``extra_body``, so the JSON sent is ``body`` whatever the SDK version declares."""
    target = inspect.unwrap(method)  # the resource class's own function: one cache entry per SDK method
    declared = _parameters(getattr(target, "__func__", target))
    extra = {key: value for key, value in body.items() if key not in declared}
    return {**{key: value for key, value in body.items() if key in declared},
            **({"extra_body": extra} if extra else {})}


def _reason(error: BaseException) -> str:
    """The innermost cause (``[Errno 111] Connection refused``), without the wrappers' text."""
    while error.__cause__ is not None or error.__context__ is not None:
        error = error.__cause__ or error.__context__
    return str(error) or type(error).__name__


def _url(error: Exception) -> str:
    request = getattr(error, "_request", None) if isinstance(error, httpx2.RequestError) else error.request
    return str(request.url) if request is not None else ""


def attempt(sdk: ModuleType | None, call: Callable[[], object], timeout_s: float) -> httpx2.Response:
    """Run one call made without retries -- an SDK method ``with_raw_response``, a GET cast to ``httpx2.Response``,
    or a plain ``httpx2`` request (``sdk`` None) -- and return its HTTP response with the body read, whatever its
    status; :class:`TransportFailure` when no response came (time out, connection, a request that cannot be sent);
    :class:`ResponseTooLarge` (a ValueError) past the ceiling."""
    status_errors = (sdk.APIStatusError,) if sdk else ()
    timeouts = (httpx2.TimeoutException, *((sdk.APITimeoutError,) if sdk else ()))
    connections = (httpx2.TransportError, *((sdk.APIConnectionError,) if sdk else ()))
    try:
        result = call()
        response = getattr(result, "http_response", result)  # a raw-response wrapper, or the response itself
        response.read()
    except status_errors as error:
        return error.response
    except timeouts as error:
        raise TransportFailure(_url(error), f"no response within {timeout_s:g} s", True) from None
    except connections as error:
        cause = error if isinstance(error, httpx2.TransportError) else error.__cause__
        if isinstance(cause, NOT_TRANSIENT):
            raise TransportFailure(_url(error), f"request failed: {type(cause).__name__}: {cause}", False) from None
        # refused or dropped connections, a body cut off mid-stream: transient
        raise TransportFailure(_url(error), f"connection failed: {_reason(error)}", True) from None
    return response

"""google-genai's client as the wire of the Gemini providers, shaped like the other SDKs for
:func:`.transport.attempt`: one attempt, its raw HTTP exchange kept.

- The body is the project's, sent verbatim: the SDK's request is a placeholder that ``HttpOptions.extra_body``
  replaces field by field (every field the body has), so part kinds this SDK version does not declare, and
  thought signatures as the server wrote them, go out as they came.
- The reply is the bytes the server sent, recorded as the SDK reads them (an httpx event hook wraps the body
  stream): the project parses them itself, streamed or not, so fields no SDK type declares still round-trip; a reply
  the SDK itself cannot read is still returned.
- The SDK's retries are off (no ``retry_options``): the retry policy is the project's. Its errors map to the other
  SDKs' classes (:data:`ERRORS`): an HTTP status (``errors.APIError``, its ``response`` the httpx one), a timeout, a
  connection failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import SimpleNamespace

import httpx2
from google.genai import errors

from .transport import tls_context

# what transport.attempt catches, under the names the openai and anthropic SDKs give them
ERRORS = SimpleNamespace(APIStatusError=errors.APIError, APITimeoutError=httpx2.TimeoutException,
                         APIConnectionError=httpx2.TransportError)
PLACEHOLDER = "."  # the SDK requires contents; extra_body's contents replace them


def async_client_args() -> dict:
    """What google-genai's client is given for the async clients it makes as it starts (httpx, aiohttp, websockets;
    never used here: requests go through the provider's sync client): the shared TLS context
    (:func:`.transport.tls_context`), instead of a new one each read from the whole CA store."""
    context = tls_context()
    return {"verify": context, "ssl": context}


class _Recording(httpx2.SyncByteStream):
    """A response body stream that keeps a copy of every byte read through it."""

    def __init__(self, stream: httpx2.SyncByteStream):
        self._stream = stream
        self.data = bytearray()

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:
            self.data += chunk
            yield chunk

    def close(self) -> None:
        self._stream.close()


class Recorder:
    """Hooks on an httpx client: keeps the last response's bytes; drops the SDK's key header when there is no key
    (the SDK sends none of its own only when it found a key, which it would read from GOOGLE_API_KEY /
    GEMINI_API_KEY for any server: it is given a placeholder instead, never sent)."""

    def __init__(self, http: httpx2.Client, keyless: bool):
        self._keyless = keyless
        self._response: httpx2.Response | None = None
        self._recording: _Recording | None = None
        http.event_hooks["request"].append(self._request)
        http.event_hooks["response"].append(self._keep)

    def _request(self, request: httpx2.Request) -> None:
        if self._keyless:
            request.headers.pop("x-goog-api-key", None)

    def _keep(self, response: httpx2.Response) -> None:
        self._recording = _Recording(response.stream)
        response.stream = self._recording
        self._response = response

    def exchange(self, call: Callable[[], object]) -> SimpleNamespace:
        """Run one SDK call; its HTTP response with the body as received, as ``.http_response``."""
        self._response = self._recording = None
        try:
            call()
        except errors.APIError as error:
            if error.response is None or error.response.status_code >= 400:
                raise
            # an error event inside a 200 stream: the recorded events say so (streaming.stream_events)
        except ValueError:  # pydantic.ValidationError, json.JSONDecodeError
            if self._response is None or self._response.status_code >= 400:
                raise
            # the SDK could not read the reply; the project reads the bytes itself
        sent, data = self._response, bytes(self._recording.data)
        self._response = self._recording = None  # nothing kept between requests (a provider pickles)
        return SimpleNamespace(http_response=httpx2.Response(sent.status_code, headers=sent.headers, content=data,
                                                             request=sent.request))

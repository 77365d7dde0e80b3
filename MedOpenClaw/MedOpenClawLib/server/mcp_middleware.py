"""ASGI middleware in front of the MCP SDK's Streamable HTTP endpoint: the bearer token (:class:`BearerToken`),
bodies bounded in size and time and params that must be an object (:class:`RequestShape`), and a client's DELETE
ending its viewer session (:class:`SessionEnd`)."""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable

import anyio

from . import rest
from .http_guard import json_answer

BEARER_CHALLENGE = ('Bearer realm="medopenclaw", error="invalid_token", error_description="send the '
                    'server\'s bearer token: Authorization: Bearer $MEDOPENCLAW_TOKEN (printed at start-up when '
                    'unset); this server does not use OAuth"')


class BearerToken:
    """ASGI middleware: every HTTP request carries ``Authorization: Bearer <token>`` (the REST token). The 401
    challenge says so in words, so a client does not mistake it for an OAuth server's."""

    def __init__(self, app, token: str):
        if not token:
            raise ValueError("a non-empty bearer token is required")
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                message = ("missing or wrong bearer token: send Authorization: Bearer <token> (MEDOPENCLAW_TOKEN, "
                           "printed at start-up when unset); this server does not use OAuth")
                await json_answer(send, 401, {"ok": False, "data": {}, "images": [], "error": {
                    "code": "unauthorized", "message": message}},
                    ((b"www-authenticate", BEARER_CHALLENGE.encode()),))
                return
        await self.app(scope, receive, send)


class RequestShape:
    """ASGI middleware in front of the SDK's endpoint: a POST body is read within :data:`~.rest.REQUEST_DEADLINE_S`
    (a trickling client loses the request), at most :data:`~.rest.MAX_BODY_BYTES`, and a request whose params are
    not an object is answered -32602 with its own id (the SDK would answer with ``id: null``)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks, size, more = [], 0, True
        with anyio.move_on_after(rest.REQUEST_DEADLINE_S) as deadline:
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunks.append(message.get("body", b""))
                size += len(chunks[-1])
                more = message.get("more_body", False)
                if size > rest.MAX_BODY_BYTES:
                    await json_answer(send, 413, jsonrpc_error(None, -32600, "request body over 1 MiB"))
                    return
        if deadline.cancelled_caught:
            await json_answer(send, 408, jsonrpc_error(None, -32600, f"the request body did not arrive within "
                                                                     f"{rest.REQUEST_DEADLINE_S:g} s"))
            return
        body = b"".join(chunks)
        refused = params_refusal(parse_json(body))
        if refused is not None:
            await json_answer(send, 400, refused)
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def parse_json(text: str | bytes) -> object:
    """The JSON value of ``text``, or None when it is not JSON (or nested beyond the parser)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def jsonrpc_error(request_id: object, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def params_refusal(message: object) -> dict | None:
    """-32602 (invalid params) with the request's own id when a request's ``params`` is not an object (MCP
    passes parameters by name); None for anything else, which the SDK validates itself."""
    if not isinstance(message, dict) or not isinstance(message.get("method"), str) or "params" not in message:
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)) or isinstance(message["params"], dict):
        return None
    kind = type(message["params"]).__name__
    return jsonrpc_error(request_id, -32602, f"params must be an object of named parameters, not {kind}")


class SessionEnd:
    """ASGI middleware: once the SDK has ended a client's transport session (its ``DELETE`` answered 2xx),
    ``on_end(session_id)`` runs on a worker thread (it stops the client's viewer)."""

    def __init__(self, app, on_end: Callable[[str], None], header: bytes):
        self.app, self.on_end, self.header = app, on_end, header

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope.get("method") != "DELETE":
            await self.app(scope, receive, send)
            return
        key = dict(scope.get("headers") or []).get(self.header, b"").decode("latin-1")
        status = []

        async def watch(message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        await self.app(scope, receive, watch)
        if key and status and 200 <= status[0] < 300:
            await anyio.to_thread.run_sync(self.on_end, key)

"""The HTTP connection layer both headless servers share (REST, :mod:`.rest_app`; MCP Streamable HTTP,
:mod:`.mcp_transport`): uvicorn with its h11 protocol, guarded. The limits are :mod:`.rest`'s, read when applied:

- at most :data:`~.rest.MAX_CONNECTIONS` open connections (fewer when ``RLIMIT_NOFILE`` is low:
  :func:`connection_limit`); a new connection past the limit closes the oldest one that has not sent a complete
  request yet -- counting a request already in its socket but not yet read, so a client whose request arrived in
  the same accept batch as a flood of half-sent connections is not the one closed -- so half-sent (or idle)
  connections cannot keep the token holder out; only when every open connection carries a request is the new one
  refused (503);
- request line and headers complete within :data:`~.rest.HEADER_TIMEOUT_S` of the connection (or of the previous
  response), at most :data:`~.rest.MAX_HEADER_BYTES`; idle keep-alive connections dropped after
  :data:`~.rest.KEEP_ALIVE_S`;
- what h11 refuses (a malformed request line, header or Content-Length; headers too large) is answered in the JSON
  error shape, not uvicorn's plain text; h11 bounds a head's bytes, not its number of header lines, which
  :class:`HeaderLimits` bounds in front of either application;
- a client that half-closes after sending its request (``shutdown(SHUT_WR)``) still gets its answer.

uvicorn has a keep-alive timeout but none for a request's headers, and its ``limit_concurrency`` answers 503 once
the connections are many, whatever they are doing -- exactly the lock-out; hence this protocol subclass, which
bounds the connections (and so the requests in progress) itself.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from http import HTTPStatus

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from . import rest

PEEK_BYTES = 8192  # of a waiting connection's socket, enough for a request head
CLOSE = (b"connection", b"close")


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline, eviction of connections that hold no request, JSON refusals
    and answers to half-closed clients."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.waiting_since: float | None = time.monotonic()  # no complete request yet
        self.half_closed = False
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._arm_header_deadline()
        open_connections = [connection for connection in self.connections if not connection.transport.is_closing()]
        if len(open_connections) > connection_limit():
            waiting = [connection for connection in open_connections
                       if getattr(connection, "waiting_since", None) is not None]
            evicted = evictee(waiting)
            # the newcomer itself when its request has not arrived yet (accepted before the client's bytes, seen
            # under load): refused like a newcomer that brought one, never closed without an answer
            if evicted is None or evicted is self:
                self.refuse(503, "busy", f"{len(open_connections) - 1} requests are running; retry")
            else:
                evicted.drop()

    def request_pending(self) -> bool:
        """Whether a complete request head already waits in this connection's socket, sent but not yet read
        (peeked, not consumed): a client that connected and sent its request at once, accepted in the same batch
        as many others."""
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return False
        peeking = socket.socket(fileno=sock.fileno())  # the same descriptor, not a copy: detached below
        try:
            head = peeking.recv(PEEK_BYTES, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except OSError:
            head = b""
        finally:
            peeking.detach()
        return b"\r\n\r\n" in head

    def _arm_header_deadline(self) -> None:
        self._cancel_header_deadline()
        self._header_timer = self.loop.call_later(rest.HEADER_TIMEOUT_S, self.drop)

    def _cancel_header_deadline(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def drop(self) -> None:
        """Close a connection that holds no request in progress (or exceeded the header deadline)."""
        self._cancel_header_deadline()
        if not self.transport.is_closing():
            try:
                self.conn.send(h11.ConnectionClosed())
            except h11.LocalProtocolError:
                pass
            self.transport.close()

    def refuse(self, status: int, code: str, message: str) -> None:
        """Answer ``status`` in the JSON error shape, whatever state h11 is in, and close."""
        self._cancel_header_deadline()
        if self.transport.is_closing():
            return
        response = rest.error_response(status, code, message)
        payload = response.encode()
        head = (f"HTTP/1.1 {response.status} {HTTPStatus(response.status).phrase}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n").encode("latin-1")
        self.transport.write(head + payload)
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """h11 refused the request (uvicorn's answer would be plain text): headers beyond the size limit are 431,
        anything else 400."""
        if len(self.conn.trailing_data[0]) > rest.MAX_HEADER_BYTES:
            self.refuse(431, "headers_too_large", f"request headers over {rest.MAX_HEADER_BYTES // 1024} KiB")
        else:
            self.refuse(400, "bad_request", "malformed HTTP request: its request line, a header or Content-Length")

    def handle_events(self) -> None:
        started = self.cycle
        super().handle_events()
        if self.cycle is not started and self.cycle is not None:  # a complete request arrived
            self.waiting_since = None
            self._cancel_header_deadline()

    def eof_received(self) -> bool | None:
        """The client will send nothing more: a request in progress is still answered (then the connection
        closes); otherwise the connection closes now."""
        if self.cycle is not None and not self.cycle.response_complete:
            self.half_closed = True
            return True
        return None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.half_closed:
            self.drop()
        elif not self.transport.is_closing():  # kept alive: waits for the next request's headers
            self.waiting_since = time.monotonic()
            self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_deadline()
        super().connection_lost(exc)


class HeaderLimits:
    """ASGI middleware in front of both applications: a request with more than :data:`~.rest.MAX_HEADERS` header
    lines, or over :data:`~.rest.MAX_HEADER_BYTES` of them, is answered 431 in the JSON shape (the check every
    front end applies, :func:`~.rest.check_headers`) and its connection closed, before anything reads its body."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            raw = scope["headers"]
            try:
                rest.check_headers(len(raw), sum(len(name) + len(value) + 4 for name, value in raw))
            except rest.HttpError as error:
                response = error.response()
                await json_answer(send, response.status, response.encode(), (CLOSE,))
                return
        await self.app(scope, receive, send)


def evictee(waiting: list) -> object | None:
    """Which of the connections ``waiting`` for a request (the new one among them) to close when a new one passes
    the limit: the one that has waited longest among those without a complete request head already sent (read
    from their sockets only when needed, oldest first); None when every one has a request waiting (the
    newcomer is refused then)."""
    for connection in sorted(waiting, key=lambda connection: connection.waiting_since):
        if not connection.request_pending():
            return connection
    return None


def connection_limit() -> int:
    """:data:`~.rest.MAX_CONNECTIONS`, or fewer when the process may open fewer files: half of ``RLIMIT_NOFILE``
    stays for everything else (viewer pipes, traces, the listening socket), so the guard evicts before ``accept``
    fails with EMFILE -- then the kernel queues connections the guard never sees, and asyncio stops accepting."""
    try:
        import resource  # POSIX only

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return rest.MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY:
        return rest.MAX_CONNECTIONS
    return max(min(rest.MAX_CONNECTIONS, soft // 2), 4)


def uvicorn_limits() -> dict:
    """``uvicorn.Config`` keywords: the guarded protocol, the header size and keep-alive limits. No
    ``limit_concurrency``: it counts every connection, so the half-sent ones the guard evicts would still turn the
    token holder away. No ``proxy_headers``: no proxy stands in front, and uvicorn would otherwise take a loopback
    client's own X-Forwarded-For/-Proto for its address and scheme."""
    return {"http": GuardedH11Protocol, "timeout_keep_alive": rest.KEEP_ALIVE_S, "backlog": rest.LISTEN_BACKLOG,
            "h11_max_incomplete_event_size": rest.MAX_HEADER_BYTES, "proxy_headers": False}


def loopback_socket(port: int) -> socket.socket:
    """Bound to 127.0.0.1 only, before the server starts, so ``--port 0`` can report the port it got; and
    already listening, so a client connecting as soon as the port is announced waits in the backlog until the
    server accepts instead of being refused (the server may still be starting on a loaded machine). Created as
    ``IPPROTO_TCP``, which its accepted connections inherit: asyncio turns Nagle off (``TCP_NODELAY``) only on
    sockets that say so, and uvicorn writes an answer's head and body apart, so Nagle would hold a small body
    until the client's delayed ACK (40 ms per answer)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(socket.SOMAXCONN)
    return listener


async def json_answer(send, status: int, body: dict | bytes, headers: tuple = ()) -> None:
    """One complete JSON response on an ASGI ``send`` (``body`` already encoded, or a dict to encode)."""
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *headers]})
    await send({"type": "http.response.body", "body": payload})

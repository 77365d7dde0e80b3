"""Connection limits for the MCP Streamable HTTP server (uvicorn), the same as the REST server's own
(:mod:`.rest`): at most :data:`~.rest.MAX_CONNECTIONS` open connections, request headers complete within
:data:`~.rest.HEADER_TIMEOUT_S` of the connection (or of the previous response), idle keep-alive connections
dropped. When the limit is reached (lower when ``RLIMIT_NOFILE`` is low: :func:`connection_limit`) a new connection
closes the oldest one that has not sent a complete request yet -- counting a request already in its socket but not
yet read, so a client whose request arrived in the same accept batch as a flood of half-sent connections is not the
one closed -- so any number of half-sent (or idle) connections cannot keep the token holder out; only when every
open connection carries a request is the new one refused.

uvicorn has a keep-alive timeout but none for a request's headers, and its ``limit_concurrency`` answers 503 once
the connections are many, whatever they are doing -- exactly the lock-out; hence this protocol subclass, which
bounds the connections (and so the requests in progress) itself.
"""

from __future__ import annotations

import asyncio
import socket
import time

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .rest import HEADER_TIMEOUT_S, KEEP_ALIVE_S, MAX_CONNECTIONS

PEEK_BYTES = 8192  # of a waiting connection's socket, enough for a request head


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and eviction of connections that hold no request."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.waiting_since = time.monotonic()  # no complete request yet
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._arm_header_deadline()
        open_connections = [connection for connection in self.connections if not connection.transport.is_closing()]
        if len(open_connections) > connection_limit():
            waiting = [connection for connection in open_connections
                       if getattr(connection, "waiting_since", None) is not None]
            evicted = evictee(waiting)
            (evicted or self).drop()

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
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer = self.loop.call_later(HEADER_TIMEOUT_S, self.drop)

    def drop(self) -> None:
        """Close a connection that holds no request in progress (or exceeded the header deadline)."""
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        if not self.transport.is_closing():
            try:
                self.conn.send(h11.ConnectionClosed())
            except h11.LocalProtocolError:
                pass
            self.transport.close()

    def handle_events(self) -> None:
        started = self.cycle
        super().handle_events()
        if self.cycle is not started and self.cycle is not None:  # a complete request arrived
            self.waiting_since = None
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():  # kept alive: waits for the next request's headers
            self.waiting_since = time.monotonic()
            self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().connection_lost(exc)


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
    """:data:`MAX_CONNECTIONS`, or fewer when the process may open fewer files: half of ``RLIMIT_NOFILE`` stays
    for everything else (viewer pipes, traces, the listening socket), so the guard evicts before ``accept``
    fails with EMFILE -- then the kernel queues connections the guard never sees, and asyncio stops accepting."""
    try:
        import resource  # POSIX only

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(min(MAX_CONNECTIONS, soft // 2), 4)


def uvicorn_limits() -> dict:
    """``uvicorn.Config`` keywords: the guarded protocol and the keep-alive timeout. No ``limit_concurrency``: it
    counts every connection, so the half-sent ones the guard evicts would still turn the token holder away."""
    return {"http": GuardedH11Protocol, "timeout_keep_alive": KEEP_ALIVE_S, "backlog": 128}

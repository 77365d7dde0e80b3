"""Serve :class:`~MedOpenClawLib.server.rest.RestService` from inside 3D Slicer, on the GUI thread.

Slicer's WebServer module binds every interface and hands its request handlers neither the headers nor the
peer address, so it cannot enforce MedOpenClaw's bearer token or loopback rule. This server uses the same
mechanism as WebServer — a Python socket watched by ``qt.QSocketNotifier``, so every request runs on the main
thread where the scene lives — but binds 127.0.0.1 only, refuses non-loopback peers, and passes the
``Authorization`` and ``X-Actor`` headers to the one request handler the headless server also uses.
There is no route to Slicer's Python (``/slicer/exec``) or to anything else that runs code.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from http import HTTPStatus

from ..core.hygiene import bounded_message
from ..server.rest import (
    CONNECTION_TIMEOUT_S,
    LISTEN_BACKLOG,
    HttpError,
    RestService,
    body_length,
    check_headers,
    error_response,
    is_loopback,
)
from .qt_compat import connect_activated, qt

METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")  # the service answers 405 where needed
HttpParseError = HttpError  # the headless server's limits and error shape, one definition


@dataclass
class HttpRequest:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


class HttpRequestReader:
    """Accumulates the bytes of one HTTP/1.1 request; :meth:`feed` returns the request once it is complete."""

    def __init__(self):
        self._buffer = b""
        self._head: tuple[str, str, dict[str, str]] | None = None
        self._body_start = 0
        self._length = 0

    def feed(self, data: bytes) -> HttpRequest | None:
        self._buffer += data
        if self._head is None:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                check_headers(self._buffer.count(b"\r\n"), len(self._buffer))
                return None
            self._head = self._parse_head(self._buffer[:end].decode("latin-1"))
            self._body_start = end + 4
        body = self._buffer[self._body_start:]
        if len(body) < self._length:
            return None
        method, target, headers = self._head
        return HttpRequest(method, target, headers, body[: self._length])

    def _parse_head(self, head: str) -> tuple[str, str, dict[str, str]]:
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise HttpError(400, "bad_request", "malformed request line")
        method, target = parts[0], parts[1]
        if method not in METHODS:
            raise HttpError(405, "method_not_allowed", f"{bounded_message(method, 40)} is not supported")
        check_headers(len(lines) - 1, len(head))
        headers = {}
        for line in lines[1:]:
            name, separator, value = line.partition(":")
            if not separator:
                raise HttpError(400, "bad_request", "malformed header line")
            headers[name.strip().lower()] = value.strip()
        self._length = body_length(headers.get("content-length"), headers.get("transfer-encoding"))
        return method, target, headers


def encode_response(status: int, payload: bytes) -> bytes:
    reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Status"
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + payload


class _Connection:
    """One client: read the request as bytes arrive, answer it, close. All on the GUI thread."""

    def __init__(self, server: LoopbackRestServer, connection: socket.socket, peer: str):
        self.server, self.socket, self.peer = server, connection, peer
        self.reader = HttpRequestReader()
        self.outgoing = b""
        connection.setblocking(False)
        self.read_notifier = qt.QSocketNotifier(connection.fileno(), qt.QSocketNotifier.Read)
        connect_activated(self.read_notifier, self.on_readable)
        self.write_notifier = None
        # an idle or trickling client is dropped, as the headless server's socket timeout does
        self.deadline = qt.QTimer()
        self.deadline.setSingleShot(True)
        self.deadline.timeout.connect(self.close)
        self.deadline.start(int(CONNECTION_TIMEOUT_S * 1000))

    def on_readable(self, *_args) -> None:
        try:
            data = self.socket.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        if not data:
            self.close()
            return
        try:
            request = self.reader.feed(data)
        except HttpError as error:
            self.respond(error.response())
            return
        if request is not None:
            try:
                response = self.server.answer(request, self.peer)
            except Exception as error:  # the client still gets an answer; the GUI thread goes on
                response = error_response(500, "internal_error", bounded_message(f"{type(error).__name__}: {error}"))
            self.respond(response, include_body=request.method != "HEAD")

    def respond(self, response, include_body: bool = True) -> None:
        self.read_notifier.setEnabled(False)
        payload = response.encode()
        self.outgoing = encode_response(response.status, payload)
        if not include_body:
            self.outgoing = self.outgoing[: len(self.outgoing) - len(payload)]
        self.write_notifier = qt.QSocketNotifier(self.socket.fileno(), qt.QSocketNotifier.Write)
        connect_activated(self.write_notifier, self.on_writable)

    def on_writable(self, *_args) -> None:
        try:
            sent = self.socket.send(self.outgoing)
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        self.outgoing = self.outgoing[sent:]
        if not self.outgoing:
            self.close()

    def close(self) -> None:
        self.deadline.stop()
        for notifier in (self.read_notifier, self.write_notifier):
            if notifier is not None:
                notifier.setEnabled(False)
        self.socket.close()
        self.server.forget(self)


class LoopbackRestServer:
    """``start()`` binds 127.0.0.1:``port`` (0 picks a free port); requests are answered on the GUI thread."""

    def __init__(self, service: RestService, port: int = 0):
        self.service = service
        self.requested_port = port
        self.port: int | None = None
        self._listener: socket.socket | None = None
        self._notifier = None
        self._connections: set[_Connection] = set()

    @property
    def running(self) -> bool:
        return self._listener is not None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}" if self.running else ""

    def start(self) -> int:
        if self.running:
            return self.port
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind(("127.0.0.1", self.requested_port))
        except OSError:
            listener.close()
            raise
        listener.listen(LISTEN_BACKLOG)
        listener.setblocking(False)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._notifier = qt.QSocketNotifier(listener.fileno(), qt.QSocketNotifier.Read)
        connect_activated(self._notifier, self._on_connection)
        return self.port

    def stop(self) -> None:
        if self._notifier is not None:
            self._notifier.setEnabled(False)
            self._notifier = None
        for connection in list(self._connections):
            connection.close()
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def _on_connection(self, *_args) -> None:
        try:
            connection, address = self._listener.accept()
        except (BlockingIOError, OSError):
            return
        self._connections.add(_Connection(self, connection, address[0]))

    def forget(self, connection: _Connection) -> None:
        self._connections.discard(connection)

    def answer(self, request: HttpRequest, peer: str):
        if not is_loopback(peer):
            return error_response(403, "forbidden", "only loopback clients are served")
        return self.service.handle(request.method, request.target, request.body,
                                   request.headers.get("authorization"), request.headers.get("x-actor"))

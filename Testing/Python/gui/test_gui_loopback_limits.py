"""The in-Slicer loopback REST server keeps the headless server's discipline, over a real socket: the JSON
error shape for every refusal and method, Content-Length checked before any body is read, header limits, and
idle clients dropped after the per-connection timeout (a Qt timer on the GUI thread)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from gui_helpers import pump  # noqa: E402

from MedOpenClawLib.gui import loopback_server  # noqa: E402
from MedOpenClawLib.server.rest import MAX_HEADERS, RestService  # noqa: E402

TOKEN = "loopback-token"


@pytest.fixture
def server(qt_application, slicer_session, monkeypatch):
    monkeypatch.setattr(loopback_server, "CONNECTION_TIMEOUT_S", 1.0)
    running = loopback_server.LoopbackRestServer(RestService(slicer_session, TOKEN))
    running.start()
    yield running
    running.stop()


def exchange(server, raw: bytes, wait_for_close: bool = True) -> tuple[str, dict | None]:
    """Send ``raw`` from a client thread while this (GUI) thread pumps Qt events; (status line, JSON body)."""
    box: dict = {}

    def client():
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
            connection.sendall(raw)
            data = b""
            while chunk := connection.recv(65536):
                data += chunk
        box["data"] = data

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    pump(lambda: not thread.is_alive(), timeout_s=15)
    head, _, body = box["data"].partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), (json.loads(body) if body else None)


def request(method: str, body: bytes = b"", length: str | None = None, extra: str = "") -> bytes:
    declared = str(len(body)) if length is None else length
    return (f"{method} /v1/state HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\n{extra}"
            f"Content-Length: {declared}\r\n\r\n").encode() + body


@pytest.mark.parametrize("raw, status, code", [
    (request("POST", length="abc"), 400, "bad_request"),
    (request("POST", length="-1"), 400, "bad_request"),
    (request("POST", length=str(50 << 20)), 413, "too_large"),
    (request("PATCH"), 405, "method_not_allowed"),
    (request("OPTIONS"), 405, "method_not_allowed"),
    (request("GET", extra="".join(f"X-{index}: {index}\r\n" for index in range(MAX_HEADERS + 1))), 431,
     "too_many_headers"),
    (b"GARBAGE\r\n\r\n", 400, "bad_request"),
])
def test_refusals_have_the_json_shape(server, raw, status, code):
    status_line, body = exchange(server, raw)
    assert f" {status} " in status_line
    assert body["ok"] is False and body["error"]["code"] == code


def test_head_gets_a_status_without_a_body(server):
    status_line, body = exchange(server, request("HEAD"))
    assert " 405 " in status_line and body is None


def test_invalid_utf8_body_is_a_json_error(server):
    raw = (f"POST /v1/actions/ping HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 8\r\n\r\n"
           ).encode() + b'{"a":"\xff"}'[:8]
    status_line, body = exchange(server, raw)
    assert " 400 " in status_line and body["error"]["code"] == "invalid_json"


def test_idle_clients_are_dropped_by_the_connection_timer(server):
    box: dict = {}

    def idle_client():
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
            connection.sendall(b"GET /v1/state HTTP/1.1\r\n")  # never completes its headers
            started = time.perf_counter()
            box["data"] = connection.recv(65536)
            box["seconds"] = time.perf_counter() - started

    thread = threading.Thread(target=idle_client, daemon=True)
    thread.start()
    pump(lambda: not thread.is_alive(), timeout_s=15)
    assert box["data"] == b"" and 0.5 < box["seconds"] < 8
    assert not server._connections

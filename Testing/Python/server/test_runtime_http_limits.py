"""HTTP hardening of the headless REST server and of the MCP Streamable HTTP server, over real sockets: every
answer is JSON, the token is checked before a body is read (even while a call runs), bodies are checked before
they are read, limits on headers, deadlines for headers and bodies that a trickling client cannot stretch,
half-sent connections that cannot lock the token holder out, and a backlog that absorbs bursts."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time

import pytest
from runtime_data import oblique_lps_affine, phantom, write_nifti

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.server import rest
from MedOpenClawLib.server.rest_app import BackgroundRestServer

TOKEN = "limits-token"
AUTH = f"Authorization: Bearer {TOKEN}\r\n"


@pytest.fixture()
def server(tmp_path, monkeypatch):
    monkeypatch.setattr(rest, "HEADER_TIMEOUT_S", 1.0)
    monkeypatch.setattr(rest, "REQUEST_DEADLINE_S", 2.0)
    root = tmp_path / "data"
    root.mkdir()
    write_nifti(root / "CT.nii.gz", phantom(0), oblique_lps_affine())
    registry = build_slicer_registry([root])
    with BackgroundRestServer(registry, TOKEN) as running:
        yield running


def exchange(port: int, raw: bytes, timeout: float = 10.0) -> tuple[int, dict | None, bytes]:
    """Send raw bytes, read until the server closes; (status, JSON body or None, raw headers)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as client:
        client.sendall(raw)
        try:
            client.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        chunks = []
        while True:
            try:
                chunk = client.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    data = b"".join(chunks)
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    return status, (json.loads(body) if body else None), head


def request(method: str, path: str, body: bytes = b"", headers: str = AUTH, length: str | None = None) -> bytes:
    declared = str(len(body)) if length is None else length
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Length: {declared}\r\n\r\n").encode() + body


def assert_json_error(answer, status: int, code: str) -> None:
    got_status, body, head = answer
    assert got_status == status, (got_status, body)
    assert b"application/json" in head
    assert body["ok"] is False and body["error"]["code"] == code


def test_invalid_utf8_and_deep_bodies_get_json_errors(server):
    assert_json_error(exchange(server.port, request("POST", "/v1/actions/ping", b'{"a": "\xff\xfe"}')), 400,
                      "invalid_json")
    deep = b"[" * 10_000 + b"]" * 10_000
    assert_json_error(exchange(server.port, request("POST", "/v1/actions/ping", deep)), 400, "invalid_json")
    nested = json.dumps({"view": json.loads("[" * 900 + "]" * 900)}).encode()
    assert_json_error(exchange(server.port, request("POST", "/v1/actions/observe", nested)), 200,
                      "invalid_argument")


@pytest.mark.parametrize("length, status, code", [("abc", 400, "bad_request"), ("-1", 400, "bad_request"),
                                                  ("1e3", 400, "bad_request"),
                                                  (str(50 << 20), 413, "too_large")])
def test_content_length_is_checked_before_reading(server, length, status, code):
    started = time.perf_counter()
    assert_json_error(exchange(server.port, request("POST", "/v1/actions/ping", b"{}", length=length)), status, code)
    assert time.perf_counter() - started < 5


def test_a_huge_declared_stream_is_never_read(server):
    """Content-Length: -1 followed by 50 MB used to be read whole before the 413 (+100 MiB RSS): now the
    server answers and closes at once, so the sender is stopped long before 50 MB."""
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
        client.sendall(request("POST", "/v1/actions/ping", length="-1"))
        try:
            while sent < 50 << 20:
                client.sendall(b"x" * (1 << 20))
                sent += 1 << 20
        except OSError:
            pass
    assert sent < 50 << 20


@pytest.mark.parametrize("method", ["PATCH", "HEAD", "OPTIONS", "BREW"])
def test_every_method_gets_the_json_shape(server, method):
    status, body, head = exchange(server.port, request(method, "/v1/state"))
    assert status == 405 and b"application/json" in head
    if method != "HEAD":
        assert body["error"]["code"] == "method_not_allowed"
    else:
        assert body is None  # HEAD answers carry no body


def test_forwarding_headers_do_not_change_who_the_client_is(server):
    """No proxy stands in front of the server: a loopback client that sends X-Forwarded-For (which uvicorn trusts
    from 127.0.0.1 unless told otherwise) is still the loopback client it is, not a remote one refused."""
    forged = AUTH + "X-Forwarded-For: 203.0.113.9\r\nX-Forwarded-Proto: https\r\nConnection: close\r\n"
    status, body, _ = exchange(server.port, request("GET", "/v1/state", headers=forged))
    assert status == 200, body


def assert_header_limits(port: int, method: str, path: str) -> None:
    """Too many header lines, too many bytes of them (in few lines, and in one): 431 in the JSON shape, closed."""
    many = "".join(f"X-Filler-{index}: {index}\r\n" for index in range(rest.MAX_HEADERS + 5))
    assert_json_error(exchange(port, request(method, path, headers=AUTH + many)), 431, "too_many_headers")
    lots = "".join(f"X-Filler-{index}: {index:0600d}\r\n" for index in range(rest.MAX_HEADERS - 4))
    assert_json_error(exchange(port, request(method, path, headers=AUTH + lots)), 431,
                      "headers_too_large")  # few enough, but over 32 KiB together
    wide = f"X-Wide: {'w' * (rest.MAX_HEADER_BYTES + 10)}\r\n"
    assert_json_error(exchange(port, request(method, path, headers=AUTH + wide)), 431, "headers_too_large")


def test_header_limits_answer_json(server):
    assert_header_limits(server.port, "GET", "/v1/state")



def test_malformed_request_lines_get_json(server):
    for raw in (b"NONSENSE\r\n\r\n", b"GET /v1/state HTTP/1.1 extra\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
            client.sendall(raw)
            data = b""
            while chunk := client.recv(65536):
                data += chunk
        # no parsable version: http.server answers HTTP/0.9-style (body only), still in the JSON shape
        body = json.loads(data.partition(b"\r\n\r\n")[2] if data.startswith(b"HTTP/") else data)
        assert body["ok"] is False and body["error"]["code"] == "bad_request"


def test_idle_clients_are_disconnected(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as idle:
        idle.sendall(b"GET /v1/state HTTP/1.1\r\n")  # never finishes its headers
        started = time.perf_counter()
        assert idle.recv(65536) == b""  # closed at the header deadline (1 s here)
        assert 0.5 < time.perf_counter() - started < 8


def trickle(port: int, raw: bytes, pause_s: float) -> tuple[int, float]:
    """Send ``raw`` one byte per ``pause_s`` until the server stops listening; (bytes sent, seconds taken)."""
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        for sent, byte in enumerate(raw):
            try:
                client.sendall(bytes([byte]))
            except OSError:
                return sent, time.perf_counter() - started
            time.sleep(pause_s)
            client.setblocking(False)
            try:
                if client.recv(65536) == b"":
                    return sent + 1, time.perf_counter() - started
            except BlockingIOError:
                pass
            except OSError:
                return sent + 1, time.perf_counter() - started
            finally:
                client.setblocking(True)
    return len(raw), time.perf_counter() - started


def test_a_trickling_client_loses_its_request_at_the_deadline(server):
    """One header byte every 0.2 s never lets a socket timeout fire, but the request's deadline does."""
    raw = request("GET", "/v1/state") + b"X" * 200
    sent, seconds = trickle(server.port, raw, 0.2)
    assert sent < len(raw) and seconds < 6


def test_the_token_is_checked_before_the_body_and_while_a_call_runs(server):
    """Answered 401 while the scene's thread is still held by a call that only ends after the answer."""
    scene_free = threading.Event()
    busy = server.executor.submit(scene_free.wait, 60)  # the scene's thread is running a long call
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
            client.sendall(b"POST /v1/actions/ping HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n")
            answer = b""
            while chunk := client.recv(65536):  # the 1 MiB body is never sent; the server closes after answering
                answer += chunk
        assert b" 401 " in answer and b'"unauthorized"' in answer and b"WWW-Authenticate: Bearer" in answer
        assert not busy.done()
    finally:
        scene_free.set()


def test_half_sent_connections_cannot_lock_the_token_holder_out(server, monkeypatch):
    monkeypatch.setattr(rest, "HEADER_TIMEOUT_S", 60.0)  # only the connection limit (8 here) can free a place
    monkeypatch.setattr(rest, "MAX_CONNECTIONS", 8)
    stalled = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(3 * 8)]
    try:
        for client in stalled:
            client.sendall(b"GET /v1/state HTTP/1.1\r\n")  # and never more
        status, body, _ = exchange(server.port, request("GET", "/v1/state"))
        assert status == 200 and "active_volume" in body
        assert sum(closed_by_server(client) for client in stalled) >= len(stalled) - 8
    finally:
        for client in stalled:
            client.close()


def test_a_body_that_does_not_arrive_loses_its_request(server):
    """Headers complete, the declared body never sent: 408 in the JSON shape at the body deadline (2 s here)."""
    status, body, head = exchange_open(server.port, request("POST", "/v1/actions/ping", length="100"))
    assert status == 408 and body["error"]["code"] == "timeout" and b"connection: close" in head.lower()


def test_when_every_connection_carries_a_request_a_new_one_is_refused_busy(server, monkeypatch):
    """The limit (4 here) reached by connections whose requests wait for the scene: nothing to evict, so the
    newcomer is answered 503 in the JSON shape; the waiting requests are all answered afterwards."""
    monkeypatch.setattr(rest, "MAX_CONNECTIONS", 4)
    scene_free = threading.Event()
    server.executor.submit(scene_free.wait, 60)  # the scene's thread is busy: the requests below wait for it
    waiting = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(4)]
    for client in waiting:
        client.sendall(request("GET", "/v1/state"))
    time.sleep(0.5)
    try:
        assert_json_error(exchange(server.port, request("GET", "/v1/state")), 503, "busy")
    finally:
        scene_free.set()  # released once the newcomer was answered, not after a fixed 2 s
    for client in waiting:
        assert client.recv(65536).startswith(b"HTTP/1.1 200")
        client.close()


def test_a_newcomer_whose_request_has_not_arrived_is_refused_busy_not_closed_silently(server, monkeypatch):
    """Under load the server can accept a connection before the client's request reaches it: with every other
    connection carrying a request, that newcomer is the only one without one, and it is answered 503 like any
    newcomer (it was closed without a word, which failed the busy test above in loaded fresh-clone runs)."""
    monkeypatch.setattr(rest, "MAX_CONNECTIONS", 4)
    scene_free = threading.Event()
    server.executor.submit(scene_free.wait, 60)  # the scene's thread is busy until released below
    waiting = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(4)]
    for client in waiting:
        client.sendall(request("GET", "/v1/state"))
    time.sleep(0.5)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as newcomer:  # sends nothing
        answer = b""
        while chunk := newcomer.recv(65536):
            answer += chunk
    scene_free.set()
    assert answer.startswith(b"HTTP/1.1 503") and b'"busy"' in answer
    for client in waiting:
        assert client.recv(65536).startswith(b"HTTP/1.1 200")
        client.close()


def test_state_is_always_strict_json(server):
    status, body, _ = exchange(server.port, request("GET", "/v1/state"))
    assert status == 200 and body["active_volume"] is None
    response = rest.Response(200, {"fov": float("inf")})
    payload = json.loads(response.encode())
    assert response.status == 500 and payload["error"]["code"] == "unencodable_response"


def test_the_server_sends_each_answer_without_waiting_for_an_acknowledgement(server):
    """uvicorn writes an answer's head and body apart: with Nagle's algorithm on, a small body waited for the
    client's delayed ACK (40 ms per request). The server's end of a connection has TCP_NODELAY."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
        client.sendall(request("GET", "/v1/state"))
        assert client.recv(65536).startswith(b"HTTP/1.1 200")
        (connection,) = server.http.server.server_state.connections  # kept alive: still open
        accepted = connection.transport.get_extra_info("socket")
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


def test_sixteen_concurrent_clients_are_all_answered(server):
    answers = []

    def one():
        answers.append(exchange(server.port, request("POST", "/v1/actions/ping", b"{}"))[0])

    threads = [threading.Thread(target=one) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert answers == [200] * 32


def test_the_process_exits_cleanly_after_serving_a_scene(tmp_path):
    """The scene thread must be gone before interpreter exit: VTK's teardown crashed (SIGSEGV) otherwise."""
    root = tmp_path / "data"
    root.mkdir()
    write_nifti(root / "CT.nii.gz", phantom(0), oblique_lps_affine())
    script = f"""
import socket
from MedOpenClawLib.server.rest_app import BackgroundRestServer
from MedOpenClawLib.apps.radiology import build_slicer_registry
registry = build_slicer_registry([{str(root)!r}])
assert registry.call("open_case", {{"dicom_dir": "CT.nii.gz", "size": 64}}).ok
with BackgroundRestServer(registry, "t") as running:
    with socket.create_connection(("127.0.0.1", running.port)) as client:
        client.sendall(b"GET /v1/state HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer t\\r\\n\\r\\n")
        assert b" 200 " in client.recv(65536)
print("served")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "served" in done.stdout, (done.returncode, done.stderr[-1500:])


# ------------------------------------------------------------------------------------ MCP Streamable HTTP (uvicorn)
@pytest.fixture()
def guarded_uvicorn(guarded_uvicorn_server):
    return guarded_uvicorn_server[0]


@pytest.fixture()
def guarded_uvicorn_server(monkeypatch):
    """uvicorn as ``mcp --transport http`` runs it (guarded protocol, the same middleware in front), over an
    endpoint that answers every authorised request; small limits so the test is quick."""
    import uvicorn

    from MedOpenClawLib.server import http_guard, mcp_transport

    monkeypatch.setattr(rest, "MAX_CONNECTIONS", 8)
    monkeypatch.setattr(rest, "HEADER_TIMEOUT_S", 1.0)
    monkeypatch.setattr(rest, "REQUEST_DEADLINE_S", 2.0)

    async def endpoint(scope, receive, send):
        if scope["type"] == "http":
            await http_guard.json_answer(send, 200, {"jsonrpc": "2.0", "id": 1, "result": {}})

    listener = http_guard.loopback_socket(0)
    app = mcp_transport.guarded(endpoint, TOKEN, on_end=lambda session: None)
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off", **http_guard.uvicorn_limits()))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield listener.getsockname()[1], server
    server.should_exit = True
    thread.join(timeout=10)


def test_mcp_http_half_sent_connections_cannot_lock_the_token_holder_out(guarded_uvicorn, monkeypatch):
    monkeypatch.setattr(rest, "HEADER_TIMEOUT_S", 60.0)  # only the connection limit can free a place here
    stalled = [socket.create_connection(("127.0.0.1", guarded_uvicorn), timeout=10) for _ in range(40)]
    try:
        for client in stalled:
            client.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never more
        time.sleep(0.2)
        status, body, _ = exchange(guarded_uvicorn, request("POST", "/mcp", b'{"jsonrpc": "2.0", "id": 1, '
                                                                             b'"method": "ping"}'))
        assert status == 200 and body["result"] == {}
        assert sum(closed_by_server(client) for client in stalled) >= len(stalled) - 8  # bounded: oldest evicted
    finally:
        for client in stalled:
            client.close()


def test_mcp_http_a_request_accepted_with_a_flood_is_not_the_one_evicted(guarded_uvicorn_server):
    """The token holder connects and sends its request at once, but the server accepts it in one batch with 20
    half-sent connections (its loop was busy): each newcomer past the limit (8) evicts the oldest connection
    without a request, and a request already waiting in a socket counts, so the token holder is answered."""
    port, server = guarded_uvicorn_server
    stalled = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(8)]
    for client in stalled:
        client.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    time.sleep(0.2)
    busy = threading.Event()
    loop = server.servers[0].get_loop()
    loop.call_soon_threadsafe(lambda: (busy.set(), time.sleep(1.0)))  # the loop accepts nothing meanwhile
    assert busy.wait(10)
    holder = socket.create_connection(("127.0.0.1", port), timeout=10)
    holder.sendall(request("POST", "/mcp", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'))
    flood = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(20)]
    try:
        for client in flood:
            client.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answer = holder.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:80]
    finally:
        for client in [*stalled, *flood, holder]:
            client.close()


def closed_by_server(client: socket.socket) -> bool:
    client.settimeout(0.5)
    try:
        return client.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_mcp_http_headers_and_bodies_have_deadlines(guarded_uvicorn):
    with socket.create_connection(("127.0.0.1", guarded_uvicorn), timeout=10) as idle:
        idle.sendall(b"POST /mcp HTTP/1.1\r\n")  # never finishes its headers
        started = time.perf_counter()
        assert idle.recv(65536) == b""
        assert time.perf_counter() - started < 8
    sent, seconds = trickle(guarded_uvicorn, request("POST", "/mcp") + b"X" * 200, 0.2)
    assert seconds < 6
    slow_body = request("POST", "/mcp", length="100")  # headers complete, the body never arrives
    status, body, _ = exchange_open(guarded_uvicorn, slow_body)
    assert status == 408 and body["error"]["code"] == -32600


def test_mcp_http_header_limits_answer_json(guarded_uvicorn):
    assert_header_limits(guarded_uvicorn, "POST", "/mcp")  # h11 alone bounds only the bytes


def test_mcp_http_array_params_get_invalid_params_with_their_id(guarded_uvicorn):
    call = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": ["observe", {}]}).encode()
    status, body, _ = exchange(guarded_uvicorn, request("POST", "/mcp", call))
    assert status == 400 and body["id"] == 7 and body["error"]["code"] == -32602
    status, body, head = exchange(guarded_uvicorn, request("POST", "/mcp", call, headers=""))
    assert status == 401 and b"does not use OAuth" in head


def exchange_open(port: int, raw: bytes) -> tuple[int, dict | None, bytes]:
    """Like :func:`exchange`, but the connection stays open for writing (the server must end it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(raw)
        data = b""
        while chunk := client.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), (json.loads(body) if body else None), head


def test_the_mcp_http_port_accepts_connections_as_soon_as_it_is_announced():
    """The banner names the port before the server has started: a client connecting at once waits in the
    listening backlog instead of being refused (what an SDK client on a loaded machine met)."""
    from MedOpenClawLib.server import http_guard

    listener = http_guard.loopback_socket(0)
    try:
        with socket.create_connection(listener.getsockname(), timeout=5):
            pass
    finally:
        listener.close()

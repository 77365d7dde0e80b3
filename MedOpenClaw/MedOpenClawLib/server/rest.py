"""The REST front-end. :class:`RestService` is a pure request -> response function shared by the headless
HTTP server below and by the in-Slicer WebServer handler, so both expose exactly the same routes:

    GET  /v1/tools[?format=openai|anthropic|mcp]   the actions offered on the session's track
    POST /v1/actions/{name}                        JSON arguments in, Result JSON out (images as base64 PNG)
    GET  /v1/state                                 viewer-state snapshot
    GET  /v1/trace                                 the audit records so far

Every request needs ``Authorization: Bearer <token>``; REST clients always act as ``agent`` (an ``X-Actor``
header naming another actor is refused). There is no route that executes code.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import queue
import secrets
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from ..registry import ACTORS, ActionRegistry
from ..result import Result

MAX_BODY_BYTES = 1 << 20
TOOL_FORMATS = {"describe": "describe", "openai": "openai_tool", "anthropic": "anthropic_tool", "mcp": "mcp_tool"}


@dataclass
class Response:
    status: int
    body: dict | list

    def encode(self) -> bytes:
        return json.dumps(self.body, default=str).encode("utf-8")


def error_response(status: int, code: str, message: str) -> Response:
    return Response(status, Result.failure(code, message).to_json())


class RestService:
    """Routes, authentication and argument decoding; the caller decides on which thread ``handle`` runs."""

    def __init__(self, registry: ActionRegistry, token: str):
        if not token:
            raise ValueError("a non-empty bearer token is required")
        self.registry = registry
        self.token = token

    def authorized(self, authorization: str | None) -> bool:
        expected = f"Bearer {self.token}"
        return authorization is not None and hmac.compare_digest(authorization.encode(), expected.encode())

    def handle(self, method: str, uri: str, body: bytes, authorization: str | None,
               actor: str | None = None) -> Response:
        if not self.authorized(authorization):
            return error_response(401, "unauthorized", "missing or wrong bearer token")
        parsed = urlparse(uri)
        path = parsed.path.rstrip("/")
        if path == "/v1/tools" and method == "GET":
            fmt = parse_qs(parsed.query).get("format", ["describe"])[0]
            if fmt not in TOOL_FORMATS:
                return error_response(400, "invalid_argument", f"format must be one of {', '.join(TOOL_FORMATS)}")
            return Response(200, [getattr(action, TOOL_FORMATS[fmt])() for action in self.registry.actions()])
        if path == "/v1/state" and method == "GET":
            return Response(200, self.registry.state())
        if path == "/v1/trace" and method == "GET":
            return Response(200, self.registry.trace.records)
        if path.startswith("/v1/actions/") and method == "POST":
            return self.call(path.removeprefix("/v1/actions/"), body, actor or "agent")
        if path in ("/v1/tools", "/v1/state", "/v1/trace") or path.startswith("/v1/actions/"):
            return error_response(405, "method_not_allowed", f"{method} is not allowed on {path}")
        return error_response(404, "not_found", f"no route {path}")

    def call(self, name: str, body: bytes, actor: str) -> Response:
        if actor not in ACTORS:
            return error_response(400, "invalid_actor", f"actor must be one of {ACTORS}")
        if actor != "agent":
            # a remote client could otherwise present itself as the clinician and escape the round budget;
            # human actions come from the in-process panels, never over the wire
            return error_response(403, "actor_not_allowed", "REST clients act as 'agent'")
        if len(body) > MAX_BODY_BYTES:
            return error_response(413, "too_large", "request body over 1 MiB")
        try:
            arguments = json.loads(body or b"{}")
        except json.JSONDecodeError as error:
            return error_response(400, "invalid_json", f"body is not JSON: {error}")
        result = self.registry.call(name, arguments, actor=actor)
        status = 404 if (result.error or {}).get("code") == "unknown_action" else 200
        return Response(status, result.to_json())


class SceneThreadExecutor:
    """Runs submitted calls one at a time on the thread that calls :meth:`run` (the scene's thread)."""

    def __init__(self):
        self._queue: queue.Queue = queue.Queue()
        self._stopped = threading.Event()

    def submit(self, function, *args) -> Future:
        future: Future = Future()
        self._queue.put((future, function, args))
        return future

    def run(self) -> None:
        while not self._stopped.is_set():
            try:
                future, function, args = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                future.set_result(function(*args))
            except BaseException as error:  # delivered to the waiting request thread
                future.set_exception(error)

    def stop(self) -> None:
        self._stopped.set()


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def make_http_server(service: RestService, executor: SceneThreadExecutor, port: int = 0) -> ThreadingHTTPServer:
    """An HTTP server bound to 127.0.0.1 whose request threads hand every request to ``executor``."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "MedOpenClaw"

        def _dispatch(self, method: str) -> None:
            if not is_loopback(self.client_address[0]):
                response = error_response(403, "forbidden", "only loopback clients are served")
            else:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, MAX_BODY_BYTES + 1)) if length else b""
                future = executor.submit(service.handle, method, self.path, body,
                                         self.headers.get("Authorization"), self.headers.get("X-Actor"))
                response = future.result()
            payload = response.encode()
            self.send_response(response.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self):  # noqa: N802 (http.server naming)
            self._dispatch("GET")

        def do_POST(self):  # noqa: N802
            self._dispatch("POST")

        def do_PUT(self):  # noqa: N802
            self._dispatch("PUT")

        def do_DELETE(self):  # noqa: N802
            self._dispatch("DELETE")

        def log_message(self, format, *args):  # keep tokens and bodies out of stderr
            return

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def new_token() -> str:
    return secrets.token_urlsafe(24)


class BackgroundRestServer:
    """For tests and embedding: HTTP on a background thread, calls executed on a dedicated scene thread."""

    def __init__(self, registry: ActionRegistry, token: str, port: int = 0):
        self.service = RestService(registry, token)
        self.executor = SceneThreadExecutor()
        self.httpd = make_http_server(self.service, self.executor, port)
        self.port = self.httpd.server_address[1]
        self._threads = [threading.Thread(target=self.executor.run, daemon=True),
                         threading.Thread(target=self.httpd.serve_forever, daemon=True)]

    def __enter__(self) -> BackgroundRestServer:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.executor.stop()

"""The REST front-end. :class:`RestService` is a pure request -> response function shared by the headless
server (:mod:`.rest_app`, on Starlette and uvicorn as the MCP server) and by the in-Slicer one
(:mod:`..gui.loopback_server`), so both expose exactly the same routes:

    GET  /v1/tools[?format=openai|anthropic|mcp]   the actions offered on the session's track
    GET  /v1/openapi.json                          the OpenAPI document of these routes, from the catalog
    POST /v1/actions/{name}                        JSON arguments in, Result JSON out (images as base64 PNG)
    GET  /v1/state                                 viewer-state snapshot
    GET  /v1/trace                                 the audit records so far
    POST /v1/sessions                              open a session of one's own: {"session": id, ...} (201)
    DELETE /v1/sessions/{id}                       end it (its viewer process stops)

Every request needs ``Authorization: Bearer <token>``; REST clients always act as ``agent`` (an ``X-Actor``
header naming another actor is refused). There is no route that executes code.

Without a ``MedOpenClaw-Session`` header a request acts on the server's shared session. With one (an id from
``POST /v1/sessions``) it acts on that session alone -- its own viewer process, scene, audit trace and round
budget; sessions are bounded in number (``--max-sessions``) and end after ``--session-idle`` seconds without a
request. Sessions exist where each can have its own viewer process (``serve``; not ``--in-process`` nor inside
Slicer, whose one scene is the clinician's).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import queue
import secrets
import signal
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from urllib.parse import parse_qs, urlparse

from .. import apps
from ..core.hygiene import bounded_message
from ..core.png import Base64Text
from ..core.registry import ACTORS, ActionRegistry
from ..core.result import ActionError, Result
from . import openapi

SESSION_HEADER = "MedOpenClaw-Session"
MAX_BODY_BYTES = 1 << 20
MAX_HEADERS = 64  # header lines per request
MAX_HEADER_BYTES = 32 * 1024  # request line and headers together
CONNECTION_TIMEOUT_S = 30.0  # the in-Slicer server: a connection's whole life (it answers one request)
# the headless servers (REST and MCP over HTTP, :mod:`.http_guard` reads these when it applies them)
HEADER_TIMEOUT_S = 10.0  # request line and headers complete within this of the connection or the last response
REQUEST_DEADLINE_S = 30.0  # a body arrives within this of its request's headers
KEEP_ALIVE_S = 5  # an idle keep-alive connection is closed after this
MAX_CONNECTIONS = 64  # open connections; beyond, the oldest one without a request in progress is closed
LISTEN_BACKLOG = 128


@dataclass
class Response:
    status: int
    body: dict | list

    def encode(self) -> bytes:
        """Strict JSON: a body holding NaN/Infinity (or unencodable text) becomes a 500 error, never invalid JSON.
        The images' base64 (:class:`~..png.Base64Text`) is spliced in, not scanned by the encoder."""
        try:
            spliced: list[str] = []
            marker = f"\x00{secrets.token_hex(8)}"  # a random nonce: a body that holds it is encoded whole
            text = json.dumps(_set_aside(self.body, spliced, marker), default=str, allow_nan=False)
            parts = text.split(json.dumps(marker))
            if len(parts) != len(spliced) + 1:  # a marker in the body itself: encode it whole
                return json.dumps(self.body, default=str, allow_nan=False).encode("utf-8")
            pieces = [parts[0]]
            for value, part in zip(spliced, parts[1:]):
                pieces += ['"', value, '"', part]
            return "".join(pieces).encode("utf-8")
        except (ValueError, TypeError, RecursionError) as error:
            self.status = 500
            message = f"the response could not be encoded as JSON ({type(error).__name__})"
            return json.dumps(Result.failure("unencodable_response", message).to_json()).encode("utf-8")


def _set_aside(value, spliced: list[str], marker: str):
    """``value`` with each Base64Text replaced by ``marker`` (in the order the JSON encoder meets them), which
    are appended to ``spliced``."""
    if isinstance(value, Base64Text):
        spliced.append(value)
        return marker
    if isinstance(value, dict):
        return {key: _set_aside(item, spliced, marker) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_set_aside(item, spliced, marker) for item in value]
    return value


def error_response(status: int, code: str, message: str) -> Response:
    return Response(status, Result.failure(code, message).to_json())


def unknown_session(key: str) -> Response:
    return error_response(404, "unknown_session", f"no session {bounded_message(key, 60)!r} (ended, expired after "
                                                  f"its idle time, or never opened): open one with POST /v1/sessions")


def unauthorized() -> Response:
    return error_response(401, "unauthorized", "missing or wrong bearer token: send Authorization: Bearer <token> "
                                               "(MEDOPENCLAW_TOKEN, printed at start-up when unset)")


class HttpError(ValueError):
    """A request refused before it reaches the service (limits, malformed framing): answered as JSON."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def response(self) -> Response:
        return error_response(self.status, self.code, self.message)


def check_headers(count: int, size: int) -> None:
    """The limits every front-end applies to a request's headers."""
    if count > MAX_HEADERS:
        raise HttpError(431, "too_many_headers", f"more than {MAX_HEADERS} request headers")
    if size > MAX_HEADER_BYTES:
        raise HttpError(431, "headers_too_large", f"request headers over {MAX_HEADER_BYTES // 1024} KiB")


def body_length(content_length: str | None, transfer_encoding: str | None = None) -> int:
    """The declared body size, checked before a single body byte is read."""
    if transfer_encoding:
        raise HttpError(411, "length_required", "send the body with a Content-Length, not a transfer encoding")
    if content_length is None:
        return 0
    value = content_length.strip()
    if not value.isascii() or not value.isdigit():
        raise HttpError(400, "bad_request", "Content-Length must be a non-negative decimal integer")
    if int(value) > MAX_BODY_BYTES:
        raise HttpError(413, "too_large", f"request body over {MAX_BODY_BYTES // (1 << 20)} MiB")
    return int(value)


class RestService:
    """Routes, authentication and argument decoding; the caller decides on which thread ``handle`` runs."""

    def __init__(self, registry: ActionRegistry, token: str, application: str = "radiology", sessions=None):
        """``sessions``, a :class:`~.sessions.SessionPool`, lets clients open sessions of their own; without it
        every request acts on ``registry``."""
        if not token:
            raise ValueError("a non-empty bearer token is required")
        self.registry = registry
        self.token = token
        self.application = application
        self.sessions = sessions

    def authorized(self, authorization: str | None) -> bool:
        expected = f"Bearer {self.token}"
        return authorization is not None and hmac.compare_digest(authorization.encode(), expected.encode())

    @staticmethod
    def on_scene(uri: str, session: str | None) -> bool:
        """Whether the request acts on the shared registry, whose calls run one at a time on the scene's thread;
        a session's requests (and opening or ending one) run on the request's own thread, in parallel with other
        sessions' (each has its own viewer process, which takes one call at a time)."""
        return session is None and not urlparse(uri).path.startswith("/v1/sessions")

    def handle(self, method: str, uri: str, body: bytes, authorization: str | None,
               actor: str | None = None, session: str | None = None) -> Response:
        if not self.authorized(authorization):
            return unauthorized()
        parsed = urlparse(uri)
        path = parsed.path.rstrip("/")
        if path == "/v1/openapi.json" and method == "GET":
            return Response(200, openapi.document(self.registry.actions(), self.application, apps.FORMATS,
                                                  SESSION_HEADER))
        if path == "/v1/sessions" or path.startswith("/v1/sessions/"):
            return self.manage_session(method, path)
        if session is None:
            return self.route(self.registry, method, parsed, body, actor)
        if self.sessions is None:
            return unknown_session(session)
        with self.sessions.use(session) as registry:
            if registry is None:
                return unknown_session(session)
            return self.route(registry, method, parsed, body, actor)

    def route(self, registry, method: str, parsed, body: bytes, actor: str | None) -> Response:
        path = parsed.path.rstrip("/")
        if path == "/v1/tools" and method == "GET":
            fmt = parse_qs(parsed.query).get("format", ["describe"])[0]
            if fmt not in apps.FORMATS:
                return error_response(400, "invalid_argument", f"format must be one of {', '.join(apps.FORMATS)}")
            return Response(200, [apps.serialize(fmt, action, self.application) for action in registry.actions()])
        if path == "/v1/state" and method == "GET":
            return Response(200, registry.state())
        if path == "/v1/trace" and method == "GET":
            return Response(200, registry.trace.records)
        if path.startswith("/v1/actions/") and method == "POST":
            return self.call(registry, path.removeprefix("/v1/actions/"), body, actor or "agent")
        if path in ("/v1/tools", "/v1/state", "/v1/trace", "/v1/openapi.json") or path.startswith("/v1/actions/"):
            return error_response(405, "method_not_allowed", f"{method} is not allowed on {path}")
        return error_response(404, "not_found", f"no route {method} {bounded_message(parsed.path, 200)!r}: the "
                                                f"routes are listed at GET /v1/openapi.json")

    def manage_session(self, method: str, path: str) -> Response:
        """``POST /v1/sessions`` opens a session (201, its id to send as the session header); ``DELETE
        /v1/sessions/{id}`` ends one."""
        if self.sessions is None:
            return error_response(409, "sessions_unavailable", "this server keeps one shared scene (serve "
                                                               "--in-process, or inside Slicer): send requests "
                                                               f"without a {SESSION_HEADER} header")
        if path == "/v1/sessions":
            if method != "POST":
                return error_response(405, "method_not_allowed", f"{method} is not allowed on {path}")
            key = secrets.token_urlsafe(18)
            try:
                self.sessions.open(key)
            except ActionError as error:
                return error_response(503, error.code, error.message)
            return Response(201, {"ok": True, "session": key, "header": SESSION_HEADER,
                                  "number": self.sessions.number(key), "idle_timeout_s": self.sessions.idle_s})
        if method != "DELETE":
            return error_response(405, "method_not_allowed", f"{method} is not allowed on {path}")
        key = path.removeprefix("/v1/sessions/")
        if not self.sessions.release(key):
            return unknown_session(key)
        return Response(200, {"ok": True, "session": key, "closed": True})

    def call(self, registry, name: str, body: bytes, actor: str) -> Response:
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
        except (ValueError, RecursionError) as error:  # JSONDecodeError, invalid UTF-8, nesting beyond the parser
            reason = "nested too deeply" if isinstance(error, RecursionError) else bounded_message(str(error), 200)
            return error_response(400, "invalid_json", f"body is not JSON: {reason}")
        result = registry.call(name, arguments, actor=actor)
        status = 404 if (result.error or {}).get("code") == "unknown_action" else 200
        return Response(status, result.to_json())


class SceneThreadExecutor:
    """Runs submitted calls one at a time on the thread that calls :meth:`run` (the scene's thread)."""

    def __init__(self):
        self._queue: queue.Queue = queue.Queue()
        self._stopped = threading.Event()
        self._terminated = False  # set by SIGTERM (:meth:`stop_on_terminate`): a plain store, safe in a handler

    def submit(self, function, *args) -> Future:
        future: Future = Future()
        self._queue.put((future, function, args))
        return future

    def run(self) -> None:
        while not (self._stopped.is_set() or self._terminated):
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
        self.submit(lambda: None)  # wakes run() now, not at its next poll (0.2 s more for every server stopped)

    def stop_on_terminate(self) -> None:
        """SIGTERM ends :meth:`run` (within its poll), as Ctrl-C does, so the server's clean-up runs and closes its
        sessions: their viewer processes stop with it, one still booting too, instead of outliving the server until
        they notice it gone (a booting one only once its start-up is done, seconds of CPU for nobody). From the main
        thread, which runs :meth:`run`."""

        def terminate(signum, frame) -> None:
            self._terminated = True

        signal.signal(signal.SIGTERM, terminate)


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(24)

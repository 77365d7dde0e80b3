"""The headless REST server: :class:`~.rest.RestService` as an ASGI application on uvicorn, the stack the MCP
server runs (HTTP/1.1 keep-alive), behind :mod:`.http_guard`'s connection limits and deadlines.

Each request, in this order: header count and size checked (:class:`~.http_guard.HeaderLimits`, as on the MCP
server); refused unless from a loopback client; the bearer
token checked before a byte of the body is read (a wrong token costs the server nothing, even while a call runs);
the declared body size checked before reading it; the body read within :data:`~.rest.REQUEST_DEADLINE_S` (a
trickling client loses its request); then the service answers -- on the scene's thread for the shared session
(:class:`~.rest.SceneThreadExecutor`, one call at a time), on a worker thread for a session of one's own. A refusal
that leaves a body unread closes the connection.
"""

from __future__ import annotations

import asyncio
import threading

import anyio
import uvicorn
from starlette.requests import Request

from ..core.hygiene import bounded_message
from ..core.registry import ActionRegistry
from . import rest
from .http_guard import CLOSE, HeaderLimits, json_answer, loopback_socket, uvicorn_limits
from .rest import SESSION_HEADER, HttpError, Response, RestService, SceneThreadExecutor, error_response

CHALLENGE = (b"WWW-Authenticate", b'Bearer realm="medopenclaw", error="invalid_token"')
GRACEFUL_SHUTDOWN_S = 5.0  # requests still running when the server stops get this long to finish


class RestEndpoint:
    """The ASGI application every path is mounted on: the request checks above, then the service's answer."""

    def __init__(self, service: RestService, executor: SceneThreadExecutor):
        self.service, self.executor = service, executor

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        closing = False
        try:
            response = await self.answer(request)
        except HttpError as error:
            response, closing = error.response(), True  # an unread body may follow
        except Exception as error:  # the connection must still get an answer
            response = error_response(500, "internal_error", bounded_message(f"{type(error).__name__}: {error}"))
        closing = closing or response.status == 401  # its body, if any, is never read
        payload = response.encode()  # may turn the status into 500 (a body that is not strict JSON)
        headers = ((CHALLENGE,) if response.status == 401 else ()) + ((CLOSE,) if closing else ())
        await json_answer(send, response.status, payload, headers)

    async def answer(self, request: Request) -> Response:
        if request.client is None or not rest.is_loopback(request.client.host):
            return error_response(403, "forbidden", "only loopback clients are served")
        headers = request.headers
        if not self.service.authorized(headers.get("authorization")):
            return rest.unauthorized()
        length = rest.body_length(headers.get("content-length"), headers.get("transfer-encoding"))
        body = b""
        if length:
            try:
                async with asyncio.timeout(rest.REQUEST_DEADLINE_S):
                    body = await request.body()
            except TimeoutError:
                raise HttpError(408, "timeout", f"the request body did not arrive within "
                                                f"{rest.REQUEST_DEADLINE_S:g} s") from None
        session = headers.get(SESSION_HEADER)
        target = request.scope["raw_path"].decode("latin-1")
        if request.scope["query_string"]:
            target += "?" + request.scope["query_string"].decode("latin-1")
        arguments = (request.method, target, body, headers.get("authorization"), headers.get("x-actor"), session)
        if self.service.on_scene(target, session):
            return await asyncio.wrap_future(self.executor.submit(self.service.handle, *arguments))
        return await anyio.to_thread.run_sync(self.service.handle, *arguments)


def rest_app(service: RestService, executor: SceneThreadExecutor) -> HeaderLimits:
    """The endpoint answers every path itself (the routes are :class:`~.rest.RestService`'s), so no router or
    error middleware stands in front of it: it catches its own errors."""
    return HeaderLimits(RestEndpoint(service, executor))


class RestHttpServer:
    """uvicorn serving :func:`rest_app` on 127.0.0.1 from a background thread; the caller runs ``executor``."""

    def __init__(self, service: RestService, executor: SceneThreadExecutor, port: int = 0):
        self.listener = loopback_socket(port)
        self.host, self.port = self.listener.getsockname()[:2]
        config = uvicorn.Config(rest_app(service, executor), log_level="error", lifespan="off",
                                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, **uvicorn_limits())
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.listener]},
                                       name="rest-http", daemon=True)

    def start(self) -> None:
        """Serve; a client may connect at once (the socket already listens)."""
        self.thread.start()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=GRACEFUL_SHUTDOWN_S + 10)
        self.listener.close()


class BackgroundRestServer:
    """For tests and embedding: HTTP on a background thread, calls executed on a dedicated scene thread."""

    def __init__(self, registry: ActionRegistry, token: str, port: int = 0, sessions=None):
        self.service = RestService(registry, token, sessions=sessions)
        self.executor = SceneThreadExecutor()
        self.http = RestHttpServer(self.service, self.executor, port)
        self.host, self.port = self.http.host, self.http.port
        self._scene = threading.Thread(target=self.executor.run, name="scene", daemon=True)

    def __enter__(self) -> BackgroundRestServer:
        self._scene.start()
        self.http.start()
        return self

    def __exit__(self, *exc) -> None:
        self.http.stop()
        self.executor.stop()
        # a scene thread still alive at interpreter exit crashes VTK's teardown (SIGSEGV): wait for it
        self._scene.join(timeout=30)

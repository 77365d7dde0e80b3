"""Model Context Protocol front-end on the official ``mcp`` SDK: the action registry as MCP tools, over stdio or
Streamable HTTP (127.0.0.1 only, the same bearer token as REST).

Any MCP client (Claude Desktop, an IDE, an agent framework) then drives the viewer through exactly the named,
schema-checked, audited actions the benchmark uses -- same registry, same policy, same trace. The SDK does the
protocol (version negotiation, framing, sessions, progress); this module only maps the registry onto it:

- every action is a tool whose ``inputSchema`` is the action's JSON schema and whose ``outputSchema`` is the
  Result envelope, returned as ``structuredContent`` (images described there, their pixels as image content);
- a failed action is a result with ``isError: true`` carrying the registry's error code and message;
- a call taking longer than a moment sends ``notifications/progress`` (when the client asked for progress) until
  it returns -- VISTA3D and registration take seconds;
- every call runs on the scene's thread (:class:`~.rest.SceneThreadExecutor`), one at a time, as over REST.

The registry is taken by its public interface (``actions``/``get``/``call``), so an in-process registry and a
supervised one serve alike.
"""

from __future__ import annotations

import argparse
import hmac
import io
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from MedOpenClawLib import __version__

from ..core import settings

INSTRUCTIONS = {
    "radiology": "Named, audited 3D viewer actions. Screen points are 0..999 from the top-left of the displayed "
                 "slice; key slices are RAS millimetres (axial=S, sagittal=R, coronal=A).",
    "pathology": "Named, audited whole-slide image viewer actions (QuPath-style). Screenshot points are 0..999 "
                 "from its top-left; WSI coordinates are level-0 pixels.",
}
PROGRESS_INTERVAL_S = 1.0
HTTP_PATH = "/mcp"
RESULT_SCHEMA = {
    "type": "object",
    "description": "The action's Result: ok, data, error {code, message}, rendered images (pixels are the image "
                   "content blocks, in this order) and artifacts written.",
    "properties": {
        "ok": {"type": "boolean"},
        "data": {"type": "object"},
        "error": {"anyOf": [{"type": "object", "properties": {"code": {"type": "string"},
                                                              "message": {"type": "string"}}},
                            {"type": "null"}]},
        "images": {"type": "array", "items": {"type": "object", "properties": {
            "view": {"type": "string"}, "width": {"type": "integer"}, "height": {"type": "integer"},
            "image_id": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}},
        "artifacts": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["ok", "data", "error", "images"],
}


def tool_definitions(actions: list) -> list:
    """Actions as MCP tools: input schema = the action's schema, output schema = the Result."""
    import mcp_types as types

    return [types.Tool(name=action.name, description=action.description, input_schema=action.parameters,
                       output_schema=RESULT_SCHEMA) for action in actions]


def call_tool_result(result: dict):
    """A Result (JSON form, images inline) as an MCP tool result: the summary as text (for clients that read only
    text), the whole envelope as structured content, each image as an image content block."""
    import mcp_types as types

    images = result.get("images") or []
    envelope = {"ok": bool(result.get("ok")), "data": result.get("data") or {}, "error": result.get("error"),
                "images": [{k: v for k, v in image.items() if k != "png_base64"} for image in images],
                "artifacts": result.get("artifacts") or []}
    summary = {key: envelope[key] for key in ("ok", "data", "error")}
    content: list = [types.TextContent(text=json.dumps(summary, default=str))]
    content += [types.ImageContent(data=image["png_base64"], mime_type="image/png")
                for image in images if image.get("png_base64")]
    return types.CallToolResult(content=content, structured_content=envelope, is_error=not envelope["ok"])


class SharedSession:
    """Every client on one registry (stdio serves one client per process; ``--in-process`` has one scene): the
    tools are listed at once, calls wait until the registry is built and run on the scene's thread."""

    def __init__(self, registry: Future, run_on_scene: Callable[[Callable[[], Any]], Future], listing: list,
                 name_clients: bool = False):
        self.registry, self.run_on_scene, self.listing = registry, run_on_scene, listing
        self.name_clients = name_clients  # several clients share it: every audit record names its client

    def registry_for(self, ctx):
        return self.registry.result()

    def audit_extra(self, ctx) -> dict | None:
        return {"client": client_label(ctx)} if self.name_clients else None

    def submit(self, registry, function: Callable[[], Any]) -> Future:
        return self.run_on_scene(function)

    def close(self) -> None:
        if self.registry.done() and self.registry.exception() is None:
            from .sessions import close_session

            close_session(self.registry.result())


class ClientSessions:
    """A registry per MCP client (each Streamable HTTP session) from a :class:`~.sessions.SessionPool`: its own
    viewer process, scene, audit trace and round budget, built on the client's first call and closed when its
    session ends (the client's DELETE, or the SDK's idle timeout). At most ``max_sessions`` at once."""

    def __init__(self, factory: Callable[[int, dict], Any], listing: list, max_sessions: int):
        from .sessions import SessionPool

        self.pool = SessionPool(factory, max_sessions)  # idle sessions: the SDK ends their connection
        self.listing = listing
        self._calls = ThreadPoolExecutor(max_workers=max_sessions, thread_name_prefix="mcp-session")

    def registry_for(self, ctx):
        connection = getattr(ctx.session, "_connection", None)  # the SDK's per-client connection state
        key = getattr(connection, "session_id", None) or "shared"
        fresh = self.pool.number(key) is None
        registry = self.pool.open(key, client_identity(ctx))
        stack = getattr(connection, "exit_stack", None)
        if fresh and stack is not None and key != "shared":  # closed with the client's connection (in a worker)
            import anyio.from_thread

            anyio.from_thread.run_sync(stack.push_async_callback, self._release, key)
        return registry

    def audit_extra(self, ctx) -> None:
        return None  # the trace is the client's own

    def submit(self, registry, function: Callable[[], Any]) -> Future:
        return self._calls.submit(function)

    async def _release(self, key: str) -> None:
        import anyio

        await anyio.to_thread.run_sync(self.pool.release, key)

    def close(self) -> None:
        self.pool.close()
        self._calls.shutdown(wait=False, cancel_futures=True)


def client_identity(ctx) -> dict:
    """The client's name and version from its ``initialize`` (what its audit header records)."""
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    return {"name": str(getattr(info, "name", "unknown"))[:80], "version": str(getattr(info, "version", ""))[:40]}


def client_label(ctx) -> str:
    connection = getattr(ctx.session, "_connection", None)
    identity = client_identity(ctx)
    return f"{identity['name']} {identity['version']} ({getattr(connection, 'session_id', None) or 'no session'})"


def import_only_the_server_parts() -> None:
    """Let ``import mcp.server.lowlevel`` load only that: ``mcp/__init__`` and ``mcp/server/__init__`` import the
    whole SDK -- its client, MCPServer, OAuth routes -- about 0.3 s of CPU before a stdio server's first answer
    (bench/mcp_startup.json). The two packages are registered without running their ``__init__``; for a server
    process of its own only, where nothing else imports the SDK's top level."""
    import importlib.machinery
    import importlib.util

    for name in ("mcp", "mcp.server"):
        if name in sys.modules:
            return
        parent = name.rpartition(".")[0]
        spec = importlib.machinery.PathFinder.find_spec(name, sys.modules[parent].__path__ if parent else None)
        if spec is None:
            return  # not installed as a plain package: the import below says so
        sys.modules[name] = importlib.util.module_from_spec(spec)


def build_server(sessions, application: str = "radiology"):
    """The SDK's low-level server over ``sessions`` (a :class:`SharedSession` or :class:`ClientSessions`): tools
    are listed from the sessions' catalog listing, each call runs on its client's registry."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    from ..core.result import ActionError, Result

    names = {action.name for action in sessions.listing}
    tools = tool_definitions(sessions.listing)

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, arguments = params.name, params.arguments or {}
        if name not in names:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {name!r}")
        try:
            registry = await anyio.to_thread.run_sync(sessions.registry_for, ctx)
        except ActionError as error:  # too many sessions
            return call_tool_result(Result.failure(error.code, error.message).to_json())
        extra = sessions.audit_extra(ctx)

        def on_scene() -> dict:
            return registry.call(name, arguments, actor="agent", audit_extra=extra).to_json(inline_images=True)

        future = sessions.submit(registry, on_scene)
        started = time.monotonic()

        async def report_progress() -> None:
            ticks = 0
            while True:
                await anyio.sleep(PROGRESS_INTERVAL_S)
                ticks += 1
                elapsed = time.monotonic() - started
                await ctx.session.report_progress(ticks, None, f"{name}: running for {elapsed:.0f} s")

        async with anyio.create_task_group() as group:
            group.start_soon(report_progress)
            result = await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
            group.cancel_scope.cancel()
        return call_tool_result(result)

    return Server("medopenclaw", version=__version__, instructions=INSTRUCTIONS[application], on_list_tools=list_tools,
                  on_call_tool=call_tool)


BEARER_CHALLENGE = ('Bearer realm="medopenclaw", error="invalid_token", error_description="send the '
                    'server\'s bearer token: Authorization: Bearer $MEDOPENCLAW_TOKEN (printed at start-up when '
                    'unset); this server does not use OAuth"')


async def json_answer(send, status: int, body: dict, headers: tuple = ()) -> None:
    """One complete JSON response on an ASGI ``send``."""
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *headers]})
    await send({"type": "http.response.body", "body": payload})


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
        import anyio

        from .rest import MAX_BODY_BYTES, REQUEST_DEADLINE_S

        chunks, size, more = [], 0, True
        with anyio.move_on_after(REQUEST_DEADLINE_S) as deadline:
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunks.append(message.get("body", b""))
                size += len(chunks[-1])
                more = message.get("more_body", False)
                if size > MAX_BODY_BYTES:
                    await json_answer(send, 413, jsonrpc_error(None, -32600, "request body over 1 MiB"))
                    return
        if deadline.cancelled_caught:
            await json_answer(send, 408, jsonrpc_error(None, -32600, f"the request body did not arrive within "
                                                                     f"{REQUEST_DEADLINE_S:g} s"))
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


def protocol_stdout() -> io.TextIOWrapper:
    """A private handle on the real stdout for protocol messages; fd 1 is pointed at stderr before the registry is
    built, so that anything VTK, Slicer or a library prints cannot corrupt the JSON-RPC stream."""
    sys.stdout.flush()
    private = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(private, "w", encoding="utf-8", buffering=1)


def refusal(line: str, error: Exception):
    """The JSON-RPC error answering a line that is not one valid message: params that are not an object -32602
    with the request's id; not JSON -32700; a batch, ``id: null`` or another shape -32600 with ``id: null``.
    The SDK only logs such lines; JSON-RPC 2.0 wants an answer."""
    from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, jsonrpc_message_adapter
    from pydantic import ValidationError

    refused = params_refusal(parse_json(line))
    if refused is not None:
        return jsonrpc_message_adapter.validate_python(refused)
    not_json = isinstance(error, ValidationError) and any(item["type"] == "json_invalid" for item in error.errors())
    code, message = (PARSE_ERROR, "parse error") if not_json else (INVALID_REQUEST, "not a single JSON-RPC message")
    return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=message))


def serve_stdio(server, writer: io.TextIOWrapper) -> None:
    """Serve one client on stdin/stdout until stdin closes (undecodable bytes become U+FFFD, then a parse error).
    The line loop is the SDK's ``mcp.server.stdio.stdio_server``'s, with every line it cannot use answered."""
    import anyio
    import mcp_types as types
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    reader = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    output = anyio.wrap_file(writer)

    async def main() -> None:
        read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
        write_stream, write_reader = create_context_streams[SessionMessage](0)

        async def read_lines() -> None:
            async with read_writer:
                async for line in reader:
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except Exception as error:
                        await write_stream.send(SessionMessage(refusal(line, error)))
                        continue
                    await read_writer.send(SessionMessage(message))

        async def write_lines() -> None:
            async with write_reader:
                async for item in write_reader:
                    await output.write(item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n")
                    await output.flush()

        async with anyio.create_task_group() as group:
            group.start_soon(read_lines)
            group.start_soon(write_lines)
            await server.run(read_stream, write_stream, server.create_initialization_options())
            group.cancel_scope.cancel()

    anyio.run(main)


def http_app(server, token: str, max_sessions: int = 8, idle_s: float = 1800.0):
    """The Streamable HTTP endpoint at ``/mcp`` (DNS-rebinding protection for loopback hosts), behind the token
    and the request-shape checks; at most ``max_sessions`` client sessions, each closed after ``idle_s`` idle."""
    endpoint = server.streamable_http_app(streamable_http_path=HTTP_PATH, host="127.0.0.1",
                                          max_sessions=max_sessions, session_idle_timeout=idle_s)
    return BearerToken(RequestShape(endpoint), token)


def loopback_socket(port: int) -> socket.socket:
    """Bound to 127.0.0.1 only, before the server starts, so ``--port 0`` can report the port it got; and
    already listening, so a client connecting as soon as the port is announced waits in the backlog until the
    server accepts instead of being refused (the server may still be starting on a loaded machine)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(socket.SOMAXCONN)
    return listener


def _run(args: argparse.Namespace) -> int:
    from .. import apps
    from .rest import SceneThreadExecutor, new_token
    from .sessions import client_trace_path, prepare_session_arguments, session_registry

    # over HTTP every client has a transport session of its own even when they share one in-process scene
    prepare_session_arguments(args, own_sessions=args.transport == "http")
    writer = protocol_stdout() if args.transport == "stdio" else None
    if args.transport == "stdio":
        import_only_the_server_parts()
    listing = apps.specs(args.app, args.track)
    front_end = f"mcp-{args.transport}"
    scene = SceneThreadExecutor()
    if args.transport == "stdio" or args.in_process:
        # one registry, built on the scene's thread once the SDK is loaded and the protocol answers (a supervised
        # viewer boots behind it: started earlier, its boot would compete with the SDK's import for the CPU); over
        # HTTP with --in-process every client shares it and is named in each record
        header = {"front_end": front_end, "data_roots": args.data_root, "app": args.app}
        registry = scene.submit(lambda: session_registry(args, header=header, save_images=False, background=True))
        sessions = SharedSession(registry, scene.submit, listing, name_clients=args.transport == "http")
    else:
        def client_session(number: int, client: dict):
            header = {"front_end": front_end, "data_roots": args.data_root, "app": args.app, "client": client,
                      "session": number}
            return session_registry(args, header=header, save_images=False, background=True,
                                    trace_path=client_trace_path(args.trace, number))

        sessions = ClientSessions(client_session, listing, args.max_sessions)
    server = build_server(sessions, args.app)
    if args.transport == "stdio":
        target, stop = (lambda: serve_stdio(server, writer)), None
    else:
        import uvicorn

        from .http_guard import uvicorn_limits

        token = settings.value("MEDOPENCLAW_TOKEN") or new_token()
        listener = loopback_socket(args.port)
        app = http_app(server, token, max_sessions=args.max_sessions, idle_s=args.session_idle)
        http = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", **uvicorn_limits()))
        target, stop = (lambda: http.run(sockets=[listener])), http
        print(f"MedOpenClaw MCP (Streamable HTTP) on http://127.0.0.1:{listener.getsockname()[1]}{HTTP_PATH}",
              flush=True)
        if not settings.is_set("MEDOPENCLAW_TOKEN"):
            print(f"bearer token: {token}", flush=True)

    def protocol() -> None:
        try:
            target()
        finally:
            scene.stop()

    thread = threading.Thread(target=protocol, name="mcp-protocol", daemon=True)
    thread.start()
    try:
        scene.run()  # the scene's thread: in-process tool calls execute here, one at a time
    except KeyboardInterrupt:
        pass
    finally:
        if stop is not None:
            stop.should_exit = True
        thread.join(timeout=5)
        sessions.close()
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from ..cli import PORT
    from .sessions import add_session_arguments

    parser = subparsers.add_parser("mcp", help="serve the viewer actions as MCP tools (stdio or Streamable HTTP)")
    add_session_arguments(parser)
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                        help="stdio (default), or Streamable HTTP on 127.0.0.1 with the REST bearer token "
                             "(MEDOPENCLAW_TOKEN, generated and printed when unset)")
    parser.add_argument("--port", type=PORT, default=8766, help="--transport http: the port (0: any free one)")
    parser.set_defaults(func=_run)

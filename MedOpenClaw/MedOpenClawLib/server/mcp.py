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
from typing import Any

from .. import __version__

INSTRUCTIONS = (
    "Named, audited 3D viewer actions. Screen points are 0..999 from the top-left of the displayed slice; "
    "key slices are RAS millimetres (axial=S, sagittal=R, coronal=A)."
)
PROGRESS_INTERVAL_S = 1.0
HTTP_PATH = "/mcp"
RESULT_SCHEMA = {
    "type": "object",
    "description": "The action's Result: ok, data, error {code, message}, rendered images (pixels are the image "
                   "content blocks, in this order) and artifacts written.",
    "properties": {
        "ok": {"type": "boolean"},
        "data": {"type": "object"},
        "error": {"type": ["object", "null"],
                  "properties": {"code": {"type": "string"}, "message": {"type": "string"}}},
        "images": {"type": "array", "items": {"type": "object", "properties": {
            "view": {"type": "string"}, "width": {"type": "integer"}, "height": {"type": "integer"},
            "image_id": {"type": ["string", "null"]}}}},
        "artifacts": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["ok", "data", "error", "images"],
}


def tool_definitions(registry) -> list:
    """The registry's actions as MCP tools: input schema = the action's schema, output schema = the Result."""
    import mcp_types as types

    return [types.Tool(name=action.name, description=action.description, input_schema=action.parameters,
                       output_schema=RESULT_SCHEMA) for action in registry.actions()]


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


def build_server(registry, run_on_scene: Callable[[Callable[[], Any]], Any]):
    """The SDK's low-level server over ``registry``; ``run_on_scene(fn)`` runs ``fn`` on the scene's thread and
    returns a :class:`concurrent.futures.Future`."""
    import anyio
    import mcp_types as types
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_definitions(registry))

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, arguments = params.name, params.arguments or {}
        if registry.get(name) is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {name!r}")

        def on_scene() -> dict:
            return registry.call(name, arguments, actor="agent").to_json(inline_images=True)

        future = run_on_scene(on_scene)
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

    return Server("medopenclaw", version=__version__, instructions=INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call_tool)


class BearerToken:
    """ASGI middleware: every HTTP request carries ``Authorization: Bearer <token>`` (the REST token)."""

    def __init__(self, app, token: str):
        if not token:
            raise ValueError("a non-empty bearer token is required")
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = json.dumps({"ok": False, "data": {}, "images": [], "error": {
                    "code": "unauthorized", "message": "missing or wrong bearer token"}}).encode()
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def protocol_stdout() -> io.TextIOWrapper:
    """A private handle on the real stdout for protocol messages; fd 1 is pointed at stderr before the registry is
    built, so that anything VTK, Slicer or a library prints cannot corrupt the JSON-RPC stream."""
    sys.stdout.flush()
    private = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(private, "w", encoding="utf-8", buffering=1)


def refusal(error: Exception):
    """The JSON-RPC error answering a line that is not one valid message (not JSON: -32700; a batch, ``id: null``
    or another shape: -32600). The SDK only logs such lines; JSON-RPC 2.0 wants an answer with ``id: null``."""
    from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
    from pydantic import ValidationError

    not_json = isinstance(error, ValidationError) and any(item["type"] == "json_invalid" for item in error.errors())
    code, message = (PARSE_ERROR, "parse error") if not_json else (INVALID_REQUEST, "not a single JSON-RPC message")
    return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=message))


def serve_stdio(server, writer: io.TextIOWrapper) -> None:
    """Serve one client on stdin/stdout until stdin closes (undecodable bytes become U+FFFD, then a parse error)."""
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    reader = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")

    async def main() -> None:
        async with stdio_server(anyio.wrap_file(reader), anyio.wrap_file(writer)) as (read_stream, write_stream):
            valid_writer, valid = create_context_streams[SessionMessage | Exception](0)

            async def refuse_invalid() -> None:
                async with valid_writer:
                    async for item in read_stream:
                        if isinstance(item, Exception):
                            await write_stream.send(SessionMessage(refusal(item)))
                        else:
                            await valid_writer.send(item)

            async with anyio.create_task_group() as group:
                group.start_soon(refuse_invalid)
                await server.run(valid, write_stream, server.create_initialization_options())

    anyio.run(main)


def http_app(server, token: str):
    """The Streamable HTTP endpoint at ``/mcp`` (DNS-rebinding protection for loopback hosts), behind the token."""
    return BearerToken(server.streamable_http_app(streamable_http_path=HTTP_PATH, host="127.0.0.1"), token)


def loopback_socket(port: int) -> socket.socket:
    """Bound to 127.0.0.1 only, before the server starts, so ``--port 0`` can report the port it got."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    return listener


def _run(args: argparse.Namespace) -> int:
    from .rest import SceneThreadExecutor, new_token
    from .sessions import close_session, session_registry

    writer = protocol_stdout() if args.transport == "stdio" else None
    registry = session_registry(args, header={"front_end": f"mcp-{args.transport}", "data_roots": args.data_root},
                                save_images=False)
    scene = SceneThreadExecutor()
    server = build_server(registry, lambda function: scene.submit(function))
    if args.transport == "stdio":
        target, stop = (lambda: serve_stdio(server, writer)), None
    else:
        import uvicorn

        token = os.environ.get("MEDOPENCLAW_TOKEN") or new_token()
        listener = loopback_socket(args.port)
        http = uvicorn.Server(uvicorn.Config(http_app(server, token), log_level="warning", lifespan="on"))
        target, stop = (lambda: http.run(sockets=[listener])), http
        print(f"MedOpenClaw MCP (Streamable HTTP) on http://127.0.0.1:{listener.getsockname()[1]}{HTTP_PATH}",
              flush=True)
        if "MEDOPENCLAW_TOKEN" not in os.environ:
            print(f"bearer token: {token}", flush=True)

    def protocol() -> None:
        try:
            target()
        finally:
            scene.stop()

    thread = threading.Thread(target=protocol, name="mcp-protocol", daemon=True)
    thread.start()
    try:
        scene.run()  # the scene's thread: tool calls execute here, one at a time
    except KeyboardInterrupt:
        pass
    finally:
        if stop is not None:
            stop.should_exit = True
        thread.join(timeout=5)
        close_session(registry)
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from .sessions import add_session_arguments

    parser = subparsers.add_parser("mcp", help="serve the viewer actions as MCP tools (stdio or Streamable HTTP)")
    add_session_arguments(parser)
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                        help="stdio (default), or Streamable HTTP on 127.0.0.1 with the REST bearer token "
                             "(MEDOPENCLAW_TOKEN, generated and printed when unset)")
    parser.add_argument("--port", type=int, default=8766, help="--transport http: the port (0: any free one)")
    parser.set_defaults(func=_run)

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
supervised one serve alike. Only the SDK's public names are used. The transports are :mod:`.mcp_transport`, the
HTTP checks in front of the SDK :mod:`.mcp_middleware`, the command line :mod:`.mcp_commands`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from MedOpenClawLib import __version__

from ..core.result import ActionError, Result
from .openapi import RESULT_SCHEMA
from .sessions import SessionPool, close_session

INSTRUCTIONS = {
    "radiology": "Named, audited 3D viewer actions. Screen points are 0..999 from the top-left of the displayed "
                 "slice; key slices are RAS millimetres (axial=S, sagittal=R, coronal=A).",
    "pathology": "Named, audited whole-slide image viewer actions (QuPath-style). Screenshot points are 0..999 "
                 "from its top-left; WSI coordinates are level-0 pixels.",
}
PROGRESS_INTERVAL_S = 1.0
SESSION_ID_HEADER = "mcp-session-id"  # Streamable HTTP: the transport session a request belongs to


def tool_definitions(actions: list) -> list:
    """Actions as MCP tools: input schema = the action's schema, output schema = the Result."""
    return [types.Tool(name=action.name, description=action.description, input_schema=action.parameters,
                       output_schema=RESULT_SCHEMA) for action in actions]


def call_tool_result(result: dict):
    """A Result (JSON form, images inline) as an MCP tool result: the summary as text (for clients that read only
    text), the whole envelope as structured content, each image as an image content block."""
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

    def end(self, key: str) -> None:
        """A client ended its session: the shared scene outlives it."""

    def close(self) -> None:
        if self.registry.done() and self.registry.exception() is None:
            close_session(self.registry.result())


class ClientSessions:
    """A registry per MCP client (each Streamable HTTP session) from a :class:`~.sessions.SessionPool`: its own
    viewer process, scene, audit trace and round budget, built on the client's first call and closed when its
    session ends (the client's DELETE: :class:`~.mcp_middleware.SessionEnd`) or after ``idle_s`` without a call
    (when the SDK ends the idle transport session too). At most ``max_sessions`` at once."""

    def __init__(self, factory: Callable[[int, dict], Any], listing: list, max_sessions: int, idle_s: float):
        self.pool = SessionPool(factory, max_sessions, idle_s)
        self.listing = listing
        self._calls = ThreadPoolExecutor(max_workers=max_sessions, thread_name_prefix="mcp-session")

    def registry_for(self, ctx):
        return self.pool.open(transport_session(ctx) or "shared", client_identity(ctx))

    def audit_extra(self, ctx) -> None:
        return None  # the trace is the client's own

    def submit(self, registry, function: Callable[[], Any]) -> Future:
        return self._calls.submit(function)

    def end(self, key: str) -> None:
        """The client ended its session: its viewer stops."""
        self.pool.release(key)

    def close(self) -> None:
        self.pool.close()
        self._calls.shutdown(wait=False, cancel_futures=True)


def transport_session(ctx) -> str | None:
    """The Streamable HTTP session of the request (None over stdio), from the HTTP request the SDK hands over."""
    headers = getattr(ctx.request, "headers", None)
    return None if headers is None else headers.get(SESSION_ID_HEADER)


def client_identity(ctx) -> dict:
    """The client's name and version from its ``initialize`` (what its audit header records)."""
    info = getattr(ctx.session.client_params, "client_info", None)
    return {"name": str(getattr(info, "name", "unknown"))[:80], "version": str(getattr(info, "version", ""))[:40]}


def client_label(ctx) -> str:
    identity = client_identity(ctx)
    return f"{identity['name']} {identity['version']} ({transport_session(ctx) or 'no session'})"


def build_server(sessions, application: str = "radiology"):
    """The SDK's low-level server over ``sessions`` (a :class:`SharedSession` or :class:`ClientSessions`): tools
    are listed from the sessions' catalog listing, each call runs on its client's registry."""
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

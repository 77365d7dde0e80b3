"""Model Context Protocol front-end: the action registry as MCP tools over stdio (JSON-RPC 2.0, one per line).

Any MCP client (Claude Desktop, an IDE, an agent framework) then drives the viewer through exactly the
named, schema-checked, audited actions the benchmark uses -- same registry, same policy, same trace. Rendered
views are returned as MCP image content. Written directly on the JSON-RPC framing: the protocol surface
needed here (initialize, ping, tools/list, tools/call) is small and a dependency would add nothing.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from typing import Any, TextIO

from .. import __version__
from ..registry import ActionRegistry
from .sessions import add_session_arguments, close_session, session_registry

SUPPORTED_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
INSTRUCTIONS = (
    "Named, audited 3D viewer actions. Screen points are 0..999 from the top-left of the displayed slice; "
    "key slices are RAS millimetres (axial=S, sagittal=R, coronal=A)."
)
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602


class RpcError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class MCPServer:
    """Answers MCP requests against one registry; every tools/call goes through ``registry.call``."""

    def __init__(self, registry: ActionRegistry, name: str = "medopenclaw"):
        self.registry = registry
        self.name = name
        self.initialized = False
        self.methods = {
            "initialize": self._initialize,
            "ping": lambda params: {},
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
        }

    def handle(self, message: Any) -> dict | list | None:
        """One decoded JSON-RPC message (or batch) in, the response out; None for notifications."""
        if isinstance(message, list):
            if not message:
                return _error(None, INVALID_REQUEST, "empty batch")
            responses = [response for item in message if (response := self._handle_one(item)) is not None]
            return responses or None
        return self._handle_one(message)

    def handle_line(self, line: str) -> dict | list | None:
        try:
            message = json.loads(line)
        except json.JSONDecodeError as error:
            return _error(None, PARSE_ERROR, f"parse error: {error.msg}")
        return self.handle(message)

    def _handle_one(self, message: Any) -> dict | None:
        if (
            not isinstance(message, dict)
            or message.get("jsonrpc") != "2.0"
            or not isinstance(message.get("method"), str)
        ):
            request_id = message.get("id") if isinstance(message, dict) else None
            return _error(request_id, INVALID_REQUEST, "not a JSON-RPC 2.0 request")
        method = message["method"]
        is_notification = "id" not in message
        if is_notification:
            if method == "notifications/initialized":
                self.initialized = True
            return None  # notifications (initialized, cancelled, ...) get no answer
        request_id = message["id"]
        params = message.get("params") or {}
        try:
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "params must be an object")
            handler = self.methods.get(method)
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, f"method {method!r} is not supported")
            if method.startswith("tools/") and not self.initialized:
                raise RpcError(INVALID_REQUEST, "call initialize first")
            return {"jsonrpc": "2.0", "id": request_id, "result": handler(params)}
        except RpcError as error:
            return _error(request_id, error.code, error.message)

    def _initialize(self, params: dict) -> dict:
        requested = params.get("protocolVersion")
        version = requested if requested in SUPPORTED_VERSIONS else SUPPORTED_VERSIONS[0]
        self.initialized = True  # some clients send tools/list before the initialized notification
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": self.name, "version": __version__},
            "instructions": INSTRUCTIONS,
        }

    def _tools_list(self, params: dict) -> dict:
        return {"tools": self.registry.mcp_tools()}

    def _tools_call(self, params: dict) -> dict:
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if not isinstance(name, str) or self.registry.get(name) is None:
            raise RpcError(INVALID_PARAMS, f"unknown tool {name!r}")
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "arguments must be an object")
        result = self.registry.call(name, arguments, actor="agent")
        summary = {"ok": result.ok, "data": result.data, "error": result.error}
        content: list[dict] = [{"type": "text", "text": json.dumps(summary, default=str)}]
        for image in result.images:
            content.append(
                {"type": "image", "data": image.to_json(inline=True)["png_base64"], "mimeType": "image/png"}
            )
        return {"content": content, "isError": not result.ok}


def _error(request_id: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def serve(server: MCPServer, reader: TextIO, writer: TextIO) -> None:
    """Read newline-delimited JSON-RPC from ``reader`` until EOF, answer on ``writer``."""
    for line in reader:
        if not line.strip():
            continue
        response = server.handle_line(line)
        if response is not None:
            writer.write(json.dumps(response, separators=(",", ":"), default=str) + "\n")
            writer.flush()


def protocol_stdout() -> TextIO:
    """A private handle on the real stdout for protocol messages; fd 1 is pointed at stderr afterwards so that
    anything VTK, Slicer or a library prints cannot corrupt the JSON-RPC stream."""
    sys.stdout.flush()
    private = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(private, "w", encoding="utf-8", buffering=1)


def _run(args: argparse.Namespace) -> int:
    writer = protocol_stdout()
    registry = session_registry(args, header={"front_end": "mcp", "data_roots": args.data_root}, save_images=False)
    # undecodable bytes become U+FFFD and then a JSON-RPC parse error, instead of ending the server
    reader = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    try:
        serve(MCPServer(registry), reader, writer)
    finally:
        close_session(registry)
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("mcp", help="serve the viewer actions as MCP tools over stdio")
    add_session_arguments(parser)
    parser.set_defaults(func=_run)

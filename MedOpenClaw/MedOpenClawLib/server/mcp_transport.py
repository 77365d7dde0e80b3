"""The MCP server's transports, both the SDK's own: stdio (``mcp.server.stdio.stdio_server``) with every line it
cannot use answered, and Streamable HTTP (``Server.streamable_http_app``) behind :mod:`.mcp_middleware` on the
guarded uvicorn of :mod:`.http_guard`."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import AsyncIterator, Callable

import anyio
import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from pydantic import ValidationError

from .http_guard import HeaderLimits, uvicorn_limits
from .mcp import SESSION_ID_HEADER
from .mcp_middleware import BearerToken, RequestShape, SessionEnd, params_refusal, parse_json

HTTP_PATH = "/mcp"


def protocol_stdout() -> io.TextIOWrapper:
    """A private handle on the real stdout for protocol messages; fd 1 is pointed at stderr before the registry is
    built, so that anything VTK, Slicer or a library prints cannot corrupt the JSON-RPC stream."""
    sys.stdout.flush()
    private = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(private, "w", encoding="utf-8", buffering=1)


def refusal(line: str, error: Exception) -> types.JSONRPCError:
    """The JSON-RPC error answering a line that is not one valid message: params that are not an object -32602
    with the request's id; not JSON -32700; a batch, ``id: null`` or another shape -32600 with ``id: null``.
    The SDK only logs such lines; JSON-RPC 2.0 wants an answer."""
    refused = params_refusal(parse_json(line))
    if refused is not None:
        return types.jsonrpc_message_adapter.validate_python(refused)
    not_json = isinstance(error, ValidationError) and any(item["type"] == "json_invalid" for item in error.errors())
    code, message = ((types.PARSE_ERROR, "parse error") if not_json
                     else (types.INVALID_REQUEST, "not a single JSON-RPC message"))
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message))


class LineOutput:
    """The protocol's output for ``stdio_server`` and for the refusals beside it: one writer at a time, so the
    lines of both never interleave."""

    def __init__(self, writer: io.TextIOWrapper):
        self.file = anyio.wrap_file(writer)
        self.lock = anyio.Lock()

    async def write(self, text: str) -> None:
        async with self.lock:
            await self.file.write(text)

    async def flush(self) -> None:
        async with self.lock:
            await self.file.flush()


async def usable_lines(lines: AsyncIterator[str], output: LineOutput) -> AsyncIterator[str]:
    """The lines that are one valid JSON-RPC message each; every other line is answered here (:func:`refusal`).
    ``stdio_server`` parses each line again: its public interface takes lines, and what it cannot parse it only
    logs (a client's few small requests; the cost is not measurable beside the answers' images)."""
    async for line in lines:
        try:
            types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception as error:  # pydantic's ValidationError, or a nesting beyond the parser
            await output.write(refusal(line, error).model_dump_json(by_alias=True, exclude_unset=True) + "\n")
            await output.flush()
            continue
        yield line


def serve_stdio(server: Server, writer: io.TextIOWrapper) -> None:
    """Serve one client on stdin/stdout until stdin closes (undecodable bytes become U+FFFD, then a parse
    error)."""
    stdin = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    output = LineOutput(writer)

    async def main() -> None:
        async with stdio_server(stdin=usable_lines(stdin, output), stdout=output) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


def http_app(server: Server, token: str, max_sessions: int, idle_s: float, on_end: Callable[[str], None]):
    """The Streamable HTTP endpoint at ``/mcp`` (DNS-rebinding protection for loopback hosts), behind the token
    and the request-shape checks; at most ``max_sessions`` client sessions, each closed after ``idle_s`` idle;
    ``on_end(session id)`` once a client ended its session."""
    endpoint = server.streamable_http_app(streamable_http_path=HTTP_PATH, host="127.0.0.1",
                                          max_sessions=max_sessions, session_idle_timeout=idle_s)
    return guarded(endpoint, token, on_end)


def guarded(endpoint, token: str, on_end: Callable[[str], None]):
    """``endpoint`` behind the checks, outermost first: header limits, the token, the request's shape, and the
    session's end on a client's DELETE."""
    return HeaderLimits(BearerToken(RequestShape(SessionEnd(endpoint, on_end, SESSION_ID_HEADER.encode())), token))


def http_server(app) -> uvicorn.Server:
    return uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", **uvicorn_limits()))

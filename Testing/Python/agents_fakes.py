"""Test doubles for the agents/runner/provider/MCP tests: a scripted model server on 127.0.0.1 that speaks the
OpenAI Chat Completions or Anthropic Messages wire format, a model object that plays back scripted turns, and a tiny
registry whose actions render images."""

from __future__ import annotations

import base64
import json
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from MedOpenClawLib.core.policy import SessionPolicy
from MedOpenClawLib.core.registry import ActionRegistry
from MedOpenClawLib.core.result import ActionError, RenderedImage, Result
from MedOpenClawLib.core.toolset import Toolset
from MedOpenClawLib.providers.messages import ModelReply, ToolCall


@dataclass
class Scripted:
    """One scripted HTTP answer: ``status`` and JSON ``body``, after ``delay_s`` seconds (and, with ``hold``, not
    before the test sets that event: a reply in flight for exactly as long as the test needs); a list ``body`` is
    sent as server-sent events (``text/event-stream``), one ``data:`` line per item; ``bytes`` as they are."""

    body: dict | list | bytes
    status: int = 200
    delay_s: float = 0.0
    headers: dict = field(default_factory=dict)
    hold: threading.Event | None = None


def aws_event_stream(events: list[dict]) -> bytes:
    """Messages events framed as Bedrock's InvokeModelWithResponseStream sends them: one AWS event-stream message
    per event (prelude, CRC32s, string headers ``:event-type: chunk``), its payload ``{"bytes": base64(event)}``
    (the binary format as botocore/eventstream.py's EventStreamBuffer reads it)."""
    frames = b""
    for event in events:
        headers = b"".join(len(name).to_bytes(1, "big") + name.encode() + b"\x07" + len(value).to_bytes(2, "big")
                           + value.encode() for name, value in ((":event-type", "chunk"),
                                                               (":content-type", "application/json"),
                                                               (":message-type", "event")))
        payload = json.dumps({"bytes": base64.b64encode(json.dumps(event).encode()).decode()}).encode()
        prelude = struct.pack(">II", 16 + len(headers) + len(payload), len(headers))
        head = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + payload
        frames += head + struct.pack(">I", zlib.crc32(head))
    return frames


class Headers(dict):
    """A request's headers, their names compared case-insensitively as HTTP's are (httpx sends them lower-case)."""

    def __init__(self, items):
        super().__init__((name.lower(), value) for name, value in items)

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return super().__contains__(str(name).lower())

    def get(self, name: str, default: object = None) -> object:
        return super().get(name.lower(), default)


class QuietServer(ThreadingHTTPServer):
    """A client that went away mid-answer (a killed run, a timed-out request) is expected here: socketserver would
    print its traceback to whatever stderr is current, i.e. into a later test's captured output."""

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def serve_forever(self, poll_interval: float = 0.05) -> None:
        """shutdown() waits until the serving loop looks at its flag, which it does every ``poll_interval``:
        socketserver's 0.5 s was paid by every test that stops a fake (most of the providers tests' time)."""
        super().serve_forever(poll_interval)


class FakeModelServer:
    """Serves scripted answers in order, then ``fallback`` (default: a 500), and records every request (path,
    headers, JSON body). With ``respond`` each answer is chosen from the request body instead, so concurrent
    conversations each get their own next turn; ``handle`` chooses it from the whole request (path, headers, body:
    servers whose URL says what is asked); ``keep_requests=False`` records nothing (long benchmarks)."""

    def __init__(self, script: list[Scripted], fallback: Scripted | None = None, port: int = 0,
                 respond: Callable[[dict], Scripted] | None = None, keep_requests: bool = True,
                 handle: Callable[[dict], Scripted] | None = None):
        self.script = list(script)
        self.fallback = fallback or Scripted({"error": "script empty"}, 500)
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                body = json.loads(raw)
                request = {"path": self.path, "headers": Headers(self.headers.items()), "body": body, "raw": raw}
                if keep_requests:
                    server.requests.append(request)
                if handle is not None:
                    answer = handle(request)
                elif respond is not None:
                    answer = respond(body)
                else:
                    answer = server.script.pop(0) if server.script else server.fallback
                time.sleep(answer.delay_s)
                if answer.hold is not None:
                    answer.hold.wait(120)
                streamed = isinstance(answer.body, list)
                payload = ("".join(f"event: {event.get('type', 'message')}\ndata: {json.dumps(event)}\n\n"
                                   for event in answer.body).encode() if streamed else answer.body
                           if isinstance(answer.body, bytes) else json.dumps(answer.body).encode())
                headers = {"Content-Type": "text/event-stream" if streamed else "application/json", **answer.headers}
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Length", str(len(payload)))
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away

            def log_message(self, *args):
                pass

        self.httpd = QuietServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> FakeModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def openai_reply(
    text: str = "", calls: list[tuple[str, str]] = (), usage: tuple[int, int] = (100, 10)
) -> dict:
    """A chat completion; ``calls`` are (name, raw JSON argument string) pairs."""
    message: dict = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(calls)
        ]
    return {
        "id": "chatcmpl-test",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
    }


def anthropic_reply(text: str = "", calls: list[tuple[str, dict]] = (), cache_read: int = 0) -> dict:
    content: list[dict] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": n, "input": a} for i, (n, a) in enumerate(calls)
    ]
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "usage": {
            "input_tokens": 120,
            "output_tokens": 12,
            "cache_read_input_tokens": cache_read,
            "cache_creation_input_tokens": 0 if cache_read else 80,
        },
    }


class ToyContext:
    """A minimal ActionContext: one slice position, so rollback and state snapshots are observable."""

    def __init__(self, max_rounds: int | None = None):
        self.policy = SessionPolicy(track="A", max_rounds=max_rounds)
        self.offset = 0.0

    def state(self) -> dict:
        return {"offset": self.offset}

    def checkpoint(self) -> float:
        return self.offset

    def rollback(self, token: float) -> None:
        self.offset = token


toy_tools = Toolset("toy")


@toy_tools.action(
    "observe",
    "viewer",
    "Render the current view.",
    properties={"size": {"type": "integer", "minimum": 8, "maximum": 256}},
)
def observe(context: ToyContext, size: int = 16) -> Result:
    pixels = np.full((size, size), int(context.offset) % 256, dtype=np.uint8)
    return Result(
        ok=True,
        data={"offset": context.offset},
        images=[RenderedImage("axial", size, size, context.offset, pixels=pixels)],
    )


@toy_tools.action(
    "set_slice_offset",
    "viewer",
    "Move the slice.",
    properties={"offset": {"type": "number"}},
    required=["offset"],
)
def set_slice_offset(context: ToyContext, offset: float) -> Result:
    if abs(offset) > 100:
        raise ActionError("out_of_range", "offset must lie within [-100, 100] mm")
    context.offset = float(offset)
    return Result(ok=True, data={"offset": context.offset})


def toy_registry(trace=None, max_rounds: int | None = None) -> ActionRegistry:
    return ActionRegistry(ToyContext(max_rounds), [toy_tools], trace)


class ScriptedModel:
    """Plays back model turns; stands in for a provider so a screenshot needs no model or network. Defined in a module
    light to import: the copilot's model process receives it pickled (MedCopilotLib.worker)."""

    def __init__(self, turns: list[tuple[str, list[tuple[str, dict]]]]):
        self.turns = list(turns)

    def complete(self, messages, tools, allow_tools: bool = True) -> ModelReply:
        text, calls = self.turns.pop(0)
        return ModelReply(text, [ToolCall(f"call_{i}", name, arguments, json.dumps(arguments))
                                 for i, (name, arguments) in enumerate(calls)])


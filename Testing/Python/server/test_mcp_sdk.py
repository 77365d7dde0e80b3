"""`medopenclaw mcp` on the official MCP SDK, driven by the SDK's own client: the current protocol version is
negotiated over stdio and Streamable HTTP, tools carry input and output schemas, open_case/observe return image
content and structured results, failed actions are isError results, long calls send progress notifications,
HTTP needs the bearer token (and says so), each HTTP client has its own session, a case package's ground truth is
never reachable over stdio and HTTP (the radiology servers here are given a package; its REST counterpart is in
test_runtime_data_roots.py), and malformed framing is refused without ending the server. The pathology viewer
served over stdio for slides is test_runtime_supervisor.py's MCP stdio server's (which also crashes it)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx2
import nibabel as nib
import numpy as np
import pytest
from agents_fakes import ToyContext, toy_tools
from mcp.client import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import LATEST_HANDSHAKE_VERSION
from running_processes import running_with

from MedOpenClawLib.core.audit import AuditTrace, read_trace
from MedOpenClawLib.core.registry import ActionRegistry
from MedOpenClawLib.core.result import Result
from MedOpenClawLib.core.toolset import Toolset
from MedOpenClawLib.server import mcp as mcp_server

REPO = Path(__file__).resolve().parents[3]
ENV = {"PYTHONPATH": os.pathsep.join([str(REPO / "MedOpenClaw"), str(REPO / "MedCopilot")]),
       "QT_QPA_PLATFORM": "offscreen"}


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """A case package as ``bench prepare --out`` writes it: data/ (the case), hidden/ (its lesion mask) and
    manifest.json. A server given it serves only data/: one server per transport proves both its tools and that."""
    root = tmp_path_factory.mktemp("mcp_data") / "CASES"
    volume = (np.indices((24, 24, 12)).sum(axis=0) % 50).astype(np.int16)
    for path in (root / "data" / "case.nii.gz", root / "hidden" / "case" / "lesion_mask.nii.gz"):
        path.parent.mkdir(parents=True)
        nib.save(nib.Nifti1Image(volume, np.diag([2.0, 2.0, 3.0, 1.0])), path)
    (root / "manifest.json").write_text(json.dumps({"format": 1, "module": "ucsf-pdgm", "cases": []}))
    return root


@pytest.fixture(scope="module")
def data_root(package) -> Path:
    return package / "data"


# The viewer kept ready for restarts after a crash (a second viewer process per session, ~1.5 s of CPU to start): the
# tests that crash no viewer leave it out, but for those of the default lifecycle (sessions released, a client gone
# while the viewer boots); the restart from it is test_runtime_supervisor.py's in-process segfault test's.
NO_SPARE = "--no-spare-viewer"


def command(data_root: Path, trace: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "MedOpenClawLib.cli", "mcp", "--data-root", str(data_root), "--trace", str(trace),
            *extra]


async def exercise(session: ClientSession, data_root: Path) -> None:
    """What every transport must do: negotiate, list schemas, open a case, observe, fail cleanly."""
    init = await session.initialize()
    assert init.protocol_version == LATEST_HANDSHAKE_VERSION and init.server_info.name == "medopenclaw"
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert {"open_case", "observe", "jump"} <= set(tools)
    assert tools["open_case"].input_schema["required"] == ["dicom_dir"]
    assert tools["observe"].output_schema == mcp_server.RESULT_SCHEMA

    opened = await session.call_tool("open_case", {"dicom_dir": str(data_root / "case.nii.gz"), "size": 64})
    assert not opened.is_error and opened.structured_content["ok"]
    images = [block for block in opened.content if block.type == "image"]
    assert len(images) == len(opened.structured_content["images"]) == 3
    assert base64.b64decode(images[0].data).startswith(b"\x89PNG") and images[0].mime_type == "image/png"
    assert "png_base64" not in opened.structured_content["images"][0]

    observed = await session.call_tool("observe", {"view": "axial", "size": 64})
    assert not observed.is_error and [block.type for block in observed.content] == ["text", "image"]
    assert json.loads(observed.content[0].text)["ok"] is True

    outside = await session.call_tool("open_case", {"dicom_dir": "/etc"})
    assert outside.is_error and outside.structured_content["error"]["code"] == "path_not_allowed"
    refused = await session.call_tool("jump", {"view": "axial", "offset": "far"})
    assert refused.is_error and refused.structured_content["error"]["code"] == "invalid_argument"
    with pytest.raises(MCPError, match="unknown tool"):
        await session.call_tool("run_python", {"code": "import os"})


async def ground_truth_is_unreachable(session: ClientSession, package: Path) -> None:
    """The package's hidden/ refused by absolute and by relative path; a relative path is taken in its data/."""
    for hidden in (str(package / "hidden" / "case" / "lesion_mask.nii.gz"), "../hidden/case"):
        refused = await session.call_tool("open_case", {"dicom_dir": hidden, "size": 64})
        assert refused.is_error and refused.structured_content["error"]["code"] == "path_not_allowed"
    relative = await session.call_tool("open_case", {"dicom_dir": "case.nii.gz", "size": 64})
    assert not relative.is_error and relative.structured_content["ok"]


def test_stdio_with_the_sdk_client(package, data_root, tmp_path):
    trace = tmp_path / "trace.jsonl"
    parts = command(package, trace, NO_SPARE)
    parameters = StdioServerParameters(command=parts[0], args=parts[1:], env=ENV)

    async def main() -> None:
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
            await exercise(session, data_root)
            await ground_truth_is_unreachable(session, package)

    anyio.run(main)
    actions = [record["action"] for record in read_trace(trace) if record.get("action")]
    # every call audited; the unknown tool never reached the registry
    assert actions == ["open_case", "observe", "open_case", "jump", *["open_case"] * 3]


def http_server(data_root: Path, trace: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, **ENV, "MEDOPENCLAW_TOKEN": "s3cret-token"}
    server = subprocess.Popen(command(data_root, trace, "--transport", "http", "--port", "0", *extra), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    banner = server.stdout.readline()
    assert banner.startswith("MedOpenClaw MCP (Streamable HTTP) on http://127.0.0.1:"), banner
    return server, banner.split(" on ")[1].strip()


@contextlib.asynccontextmanager
async def http_client(url: str):
    async with (httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token"}, timeout=60) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session):
        yield session


def test_streamable_http_needs_the_token_and_gives_each_client_its_own_session(package, data_root, tmp_path):
    """Two clients at once: each has its own scene and trace (the second sees nothing the first opened)."""
    trace = tmp_path / "trace.jsonl"
    server, url = http_server(package, trace, NO_SPARE)
    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            refused = httpx2.post(url, json=hello, headers=headers)
            assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
            challenge = refused.headers["www-authenticate"]
            assert challenge.startswith("Bearer ") and "does not use OAuth" in challenge

        async def main() -> None:
            async with http_client(url) as first:
                await exercise(first, data_root)
                async with http_client(url) as second:
                    await second.initialize()
                    seen = await second.call_tool("get_viewer_state", {})
                    assert seen.structured_content["data"]["active_volume"] is None
                mine = await first.call_tool("get_viewer_state", {})
                assert mine.structured_content["data"]["active_volume"] == "case"
                await ground_truth_is_unreachable(first, package)

        anyio.run(main)
    finally:
        server.terminate()
        server.wait(timeout=30)
    first, second = (read_trace(tmp_path / f"trace.client{number}.jsonl") for number in (1, 2))
    assert [record["action"] for record in first if record.get("action")] == [
        "open_case", "observe", "open_case", "jump", "get_viewer_state", *["open_case"] * 3]
    assert [record["action"] for record in second if record.get("action")] == ["get_viewer_state"]
    assert first[0]["payload"]["session"] == 1 and second[0]["payload"]["client"]["name"] == "mcp"


def test_http_sessions_are_bounded_and_released_when_their_client_leaves(slide_root, tmp_path):
    """Each session's viewer (and its spare) only answers a no-op call: the whole-slide viewer, whose process
    starts without loading Slicer, serves it; sessions are the same for either application."""
    trace = tmp_path / "trace.jsonl"
    server, url = http_server(slide_root, trace, "--max-sessions", "1")
    try:
        async def main() -> None:
            async with http_client(url) as first:
                await first.initialize()
                assert not (await first.call_tool("sleep", {"seconds": 0})).is_error
                async with http_client(url) as second:
                    with pytest.raises(MCPError, match="Too many open sessions"):  # answered 503 by the server
                        await second.initialize()
            async with http_client(url) as third:  # the first session ended: its place is free again
                await third.initialize()
                assert not (await third.call_tool("sleep", {"seconds": 0})).is_error

        anyio.run(main)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert [record["action"] for record in read_trace(tmp_path / "trace.client2.jsonl") if record.get("action")] == [
        "sleep"]
    # SIGTERM closed the open session: its viewer and spare (booting or not, under tmp_path) did not outlive the server
    assert server.returncode == 0 and not running_with(str(tmp_path))


def test_malformed_framing_is_refused_and_the_server_lives_on(data_root, tmp_path):
    """A batch, a line that is not JSON (or not UTF-8) and a 10,000-level nesting get a JSON-RPC error with id
    null; a request with ``id: null`` is not executed; a response sent by the client gets no reply."""
    trace = tmp_path / "trace.jsonl"
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        [{"jsonrpc": "2.0", "id": 2, "method": "ping"}],
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": ["observe", {}]},
        {"jsonrpc": "2.0", "id": None, "method": "tools/call", "params": {"name": "observe", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 5, "result": {}},
        "{not json",
        "[" * 10000 + "]" * 10000,
        b"\xff\xfe{",
        {"jsonrpc": "2.0", "id": 9, "method": "ping"},
    ]
    process = subprocess.Popen(command(data_root, trace), env={**os.environ, **ENV}, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    for line in lines:
        raw = line if isinstance(line, bytes) else (line if isinstance(line, str) else json.dumps(line)).encode()
        process.stdin.write(raw + b"\n")
    process.stdin.flush()
    answers = []
    while not answers or answers[-1].get("id") != 9:
        answers.append(json.loads(process.stdout.readline()))
    process.stdin.close()
    assert process.wait(timeout=30) == 0
    assert [answer.get("id") for answer in answers] == [1, None, 3, None, None, None, 9]
    assert [answer["error"]["code"] for answer in answers[1:6]] == [-32600, -32602, -32700, -32700, -32700]
    # the viewer boots behind the protocol: a client gone before it booted leaves no trace at all
    assert not trace.exists() or not [record for record in read_trace(trace) if record.get("action")]


def test_long_calls_report_progress_and_failures_are_error_results():
    """A call running past two progress intervals sends two updates. It ends once the client has its second
    update, not after a fixed 2.3 s that a loaded machine's late second tick (at 2 s) could miss."""
    slow = Toolset("slow")
    second_update = threading.Event()

    @slow.action("segment", "operator", "A slow operator.", properties={"seconds": {"type": "number"}})
    def segment(context: ToyContext, seconds: float = 0.0) -> Result:
        return Result(ok=True, data={"updated_twice": second_update.wait(seconds)})

    registry = ActionRegistry(ToyContext(), [toy_tools, slow], AuditTrace(None))
    scene = ThreadPoolExecutor(max_workers=1)
    built: Future = Future()
    built.set_result(registry)
    server = mcp_server.build_server(mcp_server.SharedSession(built, scene.submit, registry.actions()))
    updates: list[tuple[float, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        updates.append((value, message))
        if value >= 2:
            second_update.set()

    async def main() -> None:
        async with Client(server) as client:
            done = await client.call_tool("segment", {"seconds": 60}, progress_callback=progress)
            assert not done.is_error and done.structured_content["data"] == {"updated_twice": True}
            failed = await client.call_tool("set_slice_offset", {"offset": 500})
            assert failed.is_error and failed.structured_content["error"]["code"] == "out_of_range"

    anyio.run(main)
    assert [value for value, _ in updates] == [1, 2] and updates[0][1].startswith("segment: running for")


def test_tools_are_listed_before_the_viewer_is_ready_and_calls_wait_for_it():
    """stdio start-up: initialize and tools/list are answered from the catalog while the viewer still boots (its
    registry not built yet); a tool call waits for the viewer and then runs."""
    registry = ActionRegistry(ToyContext(), [toy_tools], AuditTrace(None))
    scene = ThreadPoolExecutor(max_workers=1)
    booting: Future = Future()
    server = mcp_server.build_server(mcp_server.SharedSession(booting, scene.submit, registry.actions()))

    async def main() -> None:
        async with Client(server) as client:
            listed = await client.list_tools()
            assert {tool.name for tool in listed.tools} == {action.name for action in registry.actions()}
            assert not booting.done()
            async with anyio.create_task_group() as group:
                answers: list = []

                async def call() -> None:
                    answers.append(await client.call_tool("observe", {"size": 8}))

                group.start_soon(call)
                await anyio.sleep(0.3)
                assert answers == []  # waiting for the viewer
                booting.set_result(registry)
            assert not answers[0].is_error

    anyio.run(main)
    assert [record["action"] for record in registry.trace.records if record.get("action")] == ["observe"]

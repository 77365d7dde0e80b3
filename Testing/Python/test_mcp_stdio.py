"""MCP front-end: JSON-RPC 2.0 framing, initialize / tools/list / tools/call with images, audit, errors."""

from __future__ import annotations

import base64
import io
import json

from agents_fakes import toy_registry

from MedOpenClawLib.audit import AuditTrace
from MedOpenClawLib.server.mcp import MCPServer, serve


def rpc(method: str, params: dict | None = None, request_id: int | None = 1) -> str:
    message = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if request_id is not None:
        message["id"] = request_id
    return json.dumps(message)


def exchange(server: MCPServer, *lines: str) -> list[dict]:
    out = io.StringIO()
    serve(server, io.StringIO("\n".join(lines) + "\n"), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_session_lists_tools_and_returns_a_rendered_view():
    trace = AuditTrace(None)
    server = MCPServer(toy_registry(trace))
    responses = exchange(
        server,
        rpc(
            "initialize",
            {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t"}},
            1,
        ),
        rpc("notifications/initialized", request_id=None),
        rpc("tools/list", {}, 2),
        rpc("tools/call", {"name": "observe", "arguments": {"size": 32}}, 3),
    )
    assert [r["id"] for r in responses] == [1, 2, 3]  # the notification got no answer
    assert responses[0]["result"]["protocolVersion"] == "2025-03-26"
    assert responses[0]["result"]["capabilities"] == {"tools": {"listChanged": False}}
    tools = {tool["name"]: tool for tool in responses[1]["result"]["tools"]}
    assert (
        set(tools) == {"observe", "set_slice_offset"} and tools["set_slice_offset"]["inputSchema"]["required"]
    )
    content = responses[2]["result"]["content"]
    assert responses[2]["result"]["isError"] is False
    assert json.loads(content[0]["text"])["ok"] is True
    image = content[1]
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]).startswith(b"\x89PNG")
    assert [record["action"] for record in trace.actions()] == ["observe"]


def test_tool_errors_are_results_and_protocol_errors_are_rpc_errors():
    server = MCPServer(toy_registry())
    responses = exchange(
        server,
        rpc("tools/list", {}, 1),  # before initialize
        rpc("initialize", {"protocolVersion": "1999-01-01"}, 2),
        rpc("tools/call", {"name": "set_slice_offset", "arguments": {"offset": 500}}, 3),
        rpc("tools/call", {"name": "run_python", "arguments": {}}, 4),
        rpc("resources/list", {}, 5),
        "{not json",
        json.dumps({"id": 7, "method": "ping"}),
        rpc("ping", {}, 8),
    )
    assert responses[0]["error"]["code"] == -32600
    assert responses[1]["result"]["protocolVersion"] == "2025-06-18"  # unknown version: offer ours
    failed = responses[2]["result"]
    assert (
        failed["isError"] is True
        and json.loads(failed["content"][0]["text"])["error"]["code"] == "out_of_range"
    )
    assert responses[3]["error"]["code"] == -32602
    assert responses[4]["error"]["code"] == -32601
    assert responses[5]["error"]["code"] == -32700 and responses[5]["id"] is None
    assert responses[6]["error"]["code"] == -32600 and responses[6]["id"] == 7
    assert responses[7]["result"] == {}
    assert server.registry.context.offset == 0.0  # the refused call changed nothing


def test_batch_requests_are_answered_together():
    server = MCPServer(toy_registry())
    batch = json.dumps([json.loads(rpc("initialize", {}, 1)), json.loads(rpc("ping", {}, 2))])
    (responses,) = exchange(server, batch)
    assert [r["id"] for r in responses] == [1, 2]
    (empty,) = exchange(server, "[]")
    assert empty["error"]["code"] == -32600  # JSON-RPC: an empty batch is an Invalid Request


def test_medopenclaw_mcp_command_serves_a_real_slicer_scene(tmp_path):
    """`medopenclaw mcp --data-root DIR` over real stdio pipes: open a NIfTI case and get rendered views."""
    import subprocess
    import sys

    import nibabel as nib
    import numpy as np

    volume = np.random.default_rng(0).normal(100, 10, (32, 32, 20)).astype(np.float32)
    nib.save(nib.Nifti1Image(volume, np.diag([1.5, 1.5, 2.0, 1.0])), tmp_path / "case_T1.nii.gz")
    trace = tmp_path / "mcp.jsonl"
    lines = [
        rpc("initialize", {"protocolVersion": "2025-06-18"}, 1),
        rpc("notifications/initialized", request_id=None),
        rpc("tools/list", {}, 2),
        rpc("tools/call", {"name": "open_case", "arguments": {"dicom_dir": str(tmp_path), "size": 64}}, 3),
        rpc("tools/call", {"name": "observe", "arguments": {"view": "axial", "size": 128}}, 4),
        rpc("tools/call", {"name": "open_case", "arguments": {"dicom_dir": "/etc"}}, 5),
    ]
    completed = subprocess.run(
        [sys.executable, "-m", "MedOpenClawLib.cli", "mcp", "--data-root", str(tmp_path), "--trace", str(trace)],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120,
    )
    responses = [json.loads(line) for line in completed.stdout.splitlines()]  # nothing but JSON-RPC on stdout
    assert [r["id"] for r in responses] == [1, 2, 3, 4, 5]
    names = {tool["name"] for tool in responses[1]["result"]["tools"]}
    assert {"open_case", "observe", "image_coords_to_ras", "record_key_slices"} <= names
    opened = responses[2]["result"]
    assert not opened["isError"] and [c["type"] for c in opened["content"]] == ["text", "image", "image", "image"]
    axial = responses[3]["result"]["content"][1]
    assert axial["mimeType"] == "image/png" and base64.b64decode(axial["data"]).startswith(b"\x89PNG")
    refused = json.loads(responses[4]["result"]["content"][0]["text"])
    assert responses[4]["result"]["isError"] and refused["error"]["code"] == "path_not_allowed"
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [r["action"] for r in records if r["kind"] == "action"] == ["open_case", "observe", "open_case"]

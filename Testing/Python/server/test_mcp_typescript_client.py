"""`medopenclaw mcp` driven by the official TypeScript MCP SDK's client (a client this project did not write; it also
validates every structured result against the tool's output schema): the pathology tools listed and called on a
slide over stdio, a case package's hidden/ files never reachable, and two Streamable HTTP clients that do not see
each other's scene. Skipped without Node.js (the ``node_clients`` fixture says why)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_mcp_sdk import ENV, NO_SPARE, http_server
from test_runtime_data_roots import write_volume

from MedOpenClawLib import apps


def drive(node_clients: Path, plan: dict) -> dict:
    """Run the TypeScript client on ``plan`` (see node/mcp_client.mjs); its JSON report."""
    completed = subprocess.run(["node", str(node_clients / "mcp_client.mjs")], input=json.dumps(plan),
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(completed.stdout)


def stdio_plan(data_root: Path, steps: list[dict]) -> dict:
    return {"transport": "stdio", "command": sys.executable,
            "args": ["-m", "MedOpenClawLib.cli", "mcp", "--data-root", str(data_root), NO_SPARE],
            "env": {**os.environ, **ENV}, "steps": steps}


def test_pathology_tools_are_listed_and_called_on_a_slide(node_clients, slide_root, slide_path):
    report = drive(node_clients, stdio_plan(slide_root, [
        {"tool": "load_image", "arguments": {"image_path": slide_path}},
        {"tool": "zoom", "arguments": {"direction": "in", "amount": 4}},
        {"tool": "capture_viewer", "arguments": {"label": "red region"}},
        {"tool": "viewer_point_to_wsi_coordinate", "arguments": {"x": 500, "y": 500}},
    ]))
    assert report["server"]["name"] == "medopenclaw"
    assert set(report["tools"][0]) == {entry["name"] for entry in apps.entries("pathology", "A")}
    loaded, zoomed, captured, point = report["results"]
    assert not any(result["isError"] for result in report["results"])
    assert loaded["structuredContent"]["data"]["state"]["image"] and zoomed["structuredContent"]["ok"]
    assert captured["content"] == ["text", "image"]
    assert point["structuredContent"]["data"]["inside_slide"] is True


def test_a_package_root_never_yields_its_hidden_files(node_clients, tmp_path):
    package = tmp_path / "CASES"
    write_volume(package / "data" / "case1" / "t1.nii.gz")
    write_volume(package / "hidden" / "case1" / "lesion_mask.nii.gz")
    (package / "manifest.json").write_text(json.dumps({"format": 1, "module": "ucsf-pdgm", "cases": []}))
    report = drive(node_clients, stdio_plan(package, [
        {"tool": "open_case", "arguments": {"dicom_dir": str(package / "data" / "case1"), "size": 64}},
        {"tool": "open_case", "arguments": {"dicom_dir": str(package / "hidden" / "case1"), "size": 64}},
        {"tool": "open_case", "arguments": {"dicom_dir": str(package / "data" / ".." / "hidden" / "case1")}},
    ]))
    opened, *refused = report["results"]
    assert not opened["isError"] and opened["content"] == ["text", "image", "image", "image"]
    assert [result["structuredContent"]["error"]["code"] for result in refused] == ["path_not_allowed"] * 2


def test_two_http_clients_do_not_see_each_others_state(node_clients, slide_root, slide_path, tmp_path):
    """Sessions are the same for either application: the whole-slide viewer serves them, each session's process
    starting without loading Slicer."""
    server, url = http_server(slide_root, tmp_path / "trace.jsonl", NO_SPARE)
    try:
        report = drive(node_clients, {"transport": "http", "url": url, "token": "s3cret-token", "clients": 2,
                                      "steps": [
            {"client": 0, "tool": "load_image", "arguments": {"image_path": slide_path}},
            {"client": 1, "tool": "focus_qupath"},
            {"client": 0, "tool": "focus_qupath"},
        ]})
    finally:
        server.terminate()
        server.wait(timeout=30)
    opened, other, mine = report["results"]
    assert not opened["isError"] and len(report["tools"]) == 2 and report["tools"][0] == report["tools"][1]
    assert other["structuredContent"]["data"]["state"]["image"] is None
    assert mine["structuredContent"]["data"]["state"]["image"]["path"] == slide_path

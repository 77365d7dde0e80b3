"""Crash containment: a native crash (SIGSEGV, SIGABRT) or a hang inside the supervised viewer answers
``viewer_crashed``, restarts the viewer and restores the session from its own audit trace -- directly, over
REST through a real socket (``medopenclaw serve``) and over MCP stdio (``medopenclaw mcp``, official client).

The crashes are real: the child runs ``crashing_worker.py``, whose markups sink (and the whole-slide viewer's
``record_view``) dies natively on a sentinel label after changing the scene (see that file). The supervisor is the
same for either application: what a Slicer scene brings of its own (a half-changed scene, a Track B
segmentation) and a hang (the calls before it run under its short call timeout, and a whole-slide viewer's first
call still loads its slide libraries) are proven on the radiology viewer; the containment that launches the most
children (a segfault restarted on the spare and the spare booted after it, malformed answers, a diverging restore,
the REST and MCP front-ends) on the whole-slide one, whose process starts without loading Slicer (about 1.6 s of
CPU each instead of 3.9 s)."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import crashing_worker
import numpy as np
import pytest
import requests
from PIL import Image
from running_processes import running_with
from runtime_data import lesion_center_ras, oblique_lps_affine

from MedOpenClawLib import apps
from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.core.audit import AuditTrace, read_trace, verify_trace
from MedOpenClawLib.replay import images_without_pixels, replay_trace
from MedOpenClawLib.server.rest import Response
from MedOpenClawLib.server.supervisor import VIEWER_CRASHED, VIEWER_UNAVAILABLE, SupervisedRegistry

DOUBLES = Path(__file__).resolve().parents[1]  # Testing/Python: the shared doubles


def supervised(tmp_path, root, viewer: str = "radiology", **options) -> SupervisedRegistry:
    trace = AuditTrace(tmp_path / "trace.jsonl", header={"test": True})
    return SupervisedRegistry(viewer, [root], trace=trace, workdir=tmp_path / "viewer",
                              command=crashing_worker.command, **options)


def ok(registry, name, **arguments):
    result = registry.call(name, arguments)
    assert result.ok, result.error
    return result


def build_session(registry, root) -> dict:
    """Volumes, slice offsets, zoom, evidence and a 0..999 mapping through the last axial image."""
    center = [float(value) for value in lesion_center_ras(oblique_lps_affine())]
    ok(registry, "open_case", dicom_dir=str(root), size=96)
    ok(registry, "set_slice_offset", view="axial", offset=center[2], size=96)
    ok(registry, "zoom", view="axial", factor=2.0, center_1000=[400, 600], size=96)
    ok(registry, "record_point", ras=center, label="lesion")
    ok(registry, "bookmark_view", view="axial", label="key")
    return ok(registry, "image_coords_to_ras", view="axial", point_1000=[250, 750]).data


def scheduled_with_the_server(pid: int) -> bool:
    """The viewer leads a process group of its own (killed as a whole) in the server's session, which Linux
    schedules as one group (autogroup): not a session of its own, waiting for its own turn at every wake-up."""
    return os.getpgid(pid) == pid and os.getsid(pid) == os.getsid(0)


def decoded(body: dict) -> dict:
    """A REST body with each image's PNG replaced by its decoded pixels (shape, mode and bytes)."""
    images = []
    for image in body["images"]:
        with Image.open(io.BytesIO(base64.b64decode(image["png_base64"]))) as png:
            images.append({**image, "png_base64": (png.mode, png.size, png.tobytes())})
    return {**body, "images": images}


def view_differences(supervised: dict, in_process: dict, folder: Path) -> str:
    """Where the views of two REST bodies differ (which pixels, or only the PNG bytes), both PNGs of each written
    to ``folder``: a mismatch seen once in many runs has to name its cause in the log of that run."""
    notes = []
    for ours, theirs in zip(supervised["images"], in_process["images"]):
        if ours["png_base64"] == theirs["png_base64"]:
            continue
        pngs = [base64.b64decode(image["png_base64"]) for image in (ours, theirs)]
        for side, png in zip(("supervised", "in_process"), pngs):
            (folder / f"{ours['view']}_{side}.png").write_bytes(png)
        first, second = (np.asarray(Image.open(io.BytesIO(png))) for png in pngs)
        if first.shape != second.shape:
            notes.append(f"{ours['view']}: {first.shape} against {second.shape} pixels")
            continue
        changed = first != second
        rows, columns = np.nonzero(changed.any(axis=-1) if changed.ndim == 3 else changed)
        if rows.size:
            notes.append(f"{ours['view']}: {rows.size} pixels differ, rows {rows.min()}-{rows.max()}, columns "
                         f"{columns.min()}-{columns.max()}")
        else:
            notes.append(f"{ours['view']}: same pixels, other PNG bytes")
    return f"{'; '.join(notes) or 'the images are equal'} (PNGs in {folder})"


def test_replay_renders_the_geometry_without_the_pixels(data_root):
    registry = build_slicer_registry([data_root])
    build_session(registry, data_root)
    drawn = ok(registry, "scroll", view="coronal", direction="up", num_slices=3, output="cine", size=64)
    with images_without_pixels(registry):
        bare = ok(registry, "scroll", view="coronal", direction="down", num_slices=3, output="cine", size=64)
        again = ok(registry, "observe", view="axial", size=96).images[0]
    assert bare.images[0].pixels is None and (bare.images[0].width, bare.images[0].height) == (
        drawn.images[0].width, drawn.images[0].height)
    shown = ok(registry, "observe", view="axial", size=96).images[0]
    assert shown.pixels is not None and again.pixels is None
    geometry = {key: value for key, value in again.geometry.to_json().items() if key != "image_id"}
    assert geometry == {key: value for key, value in shown.geometry.to_json().items() if key != "image_id"}


def test_supervised_session_matches_the_in_process_one(tmp_path, data_root):
    in_process = build_slicer_registry([data_root], track="B")
    # no spare: the restart from one is the segfault test's, a restore is the same from a freshly launched viewer
    with supervised(tmp_path, data_root, track="B", spare=False) as registry:
        assert [action.describe() for action in registry.all_actions()] == [
            action.describe() for action in in_process.all_actions()]
        assert registry.tools("mcp") == in_process.tools("mcp") and registry.get("run_python") is None
        for session in (registry, in_process):
            build_session(session, data_root)
            grown = ok(session, "segment_region", seeds_ras=[[float(v) for v in lesion_center_ras(
                oblique_lps_affine())]], method="threshold", lower=500, upper=1000, segment_name="lesion", size=64)
        assert registry.state() == in_process.state() and registry.state()["artifacts"]
        assert grown.data["segments"]
        # the views cross as raw pixels, each encoded here as it arrives: the REST body is the in-process one, the
        # images' pixels (coloured by the segmentation) and their geometry records included. Not the PNG bytes: the
        # same pixels deflated twice by ISA-L may give two valid streams (seen once in about 60 loaded runs)
        observed = Response(200, registry.call("observe", {"size": 64}).to_json())
        expected = Response(200, in_process.call("observe", {"size": 64}).to_json())
        assert decoded(observed.body) == decoded(expected.body), view_differences(observed.body, expected.body,
                                                                                  tmp_path)
        assert observed.body["images"][0]["geometry"] and observed.body["images"][0]["png_base64"]
        deep: list = []
        for _ in range(5000):  # deeper than json can even send: refused by the same hygiene in this process
            deep = [deep]
        for arguments in ({"ras": deep}, {"ras": [0, 0, float("nan")]}, {"ras": [0, 0, 0], "label": "\ud800"}):
            assert registry.call("record_point", arguments).error == in_process.call("record_point", arguments).error

        # Track B: the operator's segmentation and artifact graph survive an abort (SIGABRT); the half-added
        # markups node died with the child: same volumes, offsets, zoom, evidence and 0..999 mapping
        before = registry.state()
        evidence = ok(registry, "list_evidence").data
        mapped = ok(registry, "image_coords_to_ras", view="axial", point_1000=[250, 750]).data
        crashed = registry.call("record_point", {"ras": [0, 0, 0], "label": "CRASH:abort"})
        assert crashed.error["code"] == VIEWER_CRASHED and "SIGABRT" in crashed.error["message"]
        assert registry.state() == before
        assert ok(registry, "list_evidence").data == evidence
        assert ok(registry, "image_coords_to_ras", view="axial", point_1000=[250, 750]).data == mapped
        assert ok(registry, "set_slice_offset", view="sagittal", offset=before["views"]["sagittal"]["offset_mm"],
                  size=64).images
        refused = registry.call("set_slice_offset", {"view": "axial", "offset": 1e6})
        assert refused.error["code"] == "out_of_range"  # errors of the restored viewer are the usual ones
    assert verify_trace(tmp_path / "trace.jsonl").ok and replay_trace(tmp_path / "trace.jsonl", [data_root]).ok


def test_hang_is_stopped_and_repeated_crashes_close_the_session(tmp_path, data_root):
    with supervised(tmp_path, data_root, call_timeout_s=4.0, max_crashes=1) as registry:
        ok(registry, "open_case", dicom_dir=str(data_root), size=64)
        before = registry.state()
        hung = registry.call("record_point", {"ras": [0, 0, 0], "label": "CRASH:hang"})
        assert hung.error["code"] == VIEWER_CRASHED and "stopped answering" in hung.error["message"]
        assert registry.state() == before

        # a second crash within the window exceeds max_crashes=1: no restart, a clear error from now on
        crashed = registry.call("record_point", {"ras": [0, 0, 0], "label": "CRASH:segv"})
        assert crashed.error["code"] == VIEWER_CRASHED and "session is closed" in crashed.error["message"]
        refused = registry.call("list_evidence", {})
        assert refused.error["code"] == VIEWER_UNAVAILABLE and "restart the server" in refused.error["message"]
        assert registry._worker is None and registry._spare is None  # no child left running

    kinds = [record["kind"] for record in read_trace(tmp_path / "trace.jsonl")]
    assert kinds.count(VIEWER_CRASHED) == 2 and kinds.count(VIEWER_UNAVAILABLE) == 1
    assert verify_trace(tmp_path / "trace.jsonl").ok and replay_trace(tmp_path / "trace.jsonl", [data_root]).ok


def test_a_malformed_answer_is_contained_like_a_crash(tmp_path, slide_root, slide_path):
    """The child ran the call and then broke the protocol: the call is not applied, the session is restored on a
    new child and the next call works (each a freshly launched one: no spare booted beside each)."""
    with supervised(tmp_path, slide_root, "pathology", spare=False) as registry:
        ok(registry, "load_image", image_path=slide_path)
        before = registry.state()
        said_by_label = {
            "CRASH:garble": "malformed answer while running 'record_view_as_evidence' (protocol error: a line",
            "CRASH:badpng": "malformed answer while running 'record_view_as_evidence' (malformed answer: "
                            "ValueError('attachment 0",
            "CRASH:truncate": "crashed while running 'record_view_as_evidence'"}
        for label, said in said_by_label.items():
            answer = registry.call("record_view_as_evidence", {"label": label})
            assert answer.error["code"] == VIEWER_CRASHED and said in answer.error["message"], answer.error
            assert "session restored" in answer.error["message"] and registry.state() == before
        assert ok(registry, "capture_viewer", label="after").images[0].png_bytes().startswith(b"\x89PNG")
        assert registry.state()["evidence"] == {"captures": 1, "recorded_views": 0}  # none of the three applied
    causes = [record["payload"]["cause"] for record in read_trace(tmp_path / "trace.jsonl")
              if record["kind"] == VIEWER_CRASHED]
    assert "attachment bytes" in causes[-1]
    assert verify_trace(tmp_path / "trace.jsonl").ok and replay_trace(tmp_path / "trace.jsonl", [slide_root]).ok


def test_a_restore_that_diverges_from_the_trace_closes_the_session(tmp_path, slide_root, slide_path):
    with supervised(tmp_path, slide_root, "pathology", spare=False) as registry:
        ok(registry, "load_image", image_path=slide_path)
        path = tmp_path / "trace.jsonl"
        records = read_trace(path)
        records[-1]["state"]["evidence"]["captures"] = 1  # the trace no longer describes the session
        path.write_text("".join(json.dumps(record) + "\n" for record in records))
        crashed = registry.call("record_view_as_evidence", {"label": "CRASH:segv"})
        assert crashed.error["code"] == VIEWER_CRASHED and "diverged from its audit trace" in crashed.error["message"]
        assert registry.call("observe", {}).error["code"] == VIEWER_UNAVAILABLE and registry._worker is None


def test_segfault_answers_viewer_crashed_and_restores_the_session_and_a_closed_session_refuses_calls(
        tmp_path, slide_root, slide_path):
    """A SIGSEGV restarts on the spare and restores the session; close() then stops the serving child and the spare
    booted after the restart (both processes gone), and later calls are refused: the session's own viewers, not a
    second pair started for it. On the whole-slide viewer: what a Slicer scene brings of its own is restored after
    the abort of test_supervised_session_matches_the_in_process_one."""
    with supervised(tmp_path, slide_root, "pathology") as registry:
        assert "record_view_as_evidence" in {tool["name"] for tool in registry.tools("mcp")}
        ok(registry, "load_image", image_path=slide_path)
        ok(registry, "zoom", direction="in", amount=4, unit="factor")
        ok(registry, "record_view_as_evidence", label="first")
        mapped = ok(registry, "viewer_point_to_wsi_coordinate", x=250, y=750).data
        before = registry.state()
        first_viewer = registry.viewer_pid
        assert scheduled_with_the_server(first_viewer)

        crashed = registry.call("record_view_as_evidence", {"label": "CRASH:segv"})
        assert not crashed.ok and crashed.error["code"] == VIEWER_CRASHED
        assert "SIGSEGV" in crashed.error["message"] and "restored" in crashed.error["message"]
        assert registry.viewer_pid != first_viewer and scheduled_with_the_server(registry.viewer_pid)  # the spare

        # the view the crashing call recorded died with the child: same slide, zoom, evidence and point mapping
        assert registry.state() == before
        assert ok(registry, "viewer_point_to_wsi_coordinate", x=250, y=750).data == mapped
        assert ok(registry, "record_view_as_evidence", label="second").data["recorded_view"]["index"] == 1

        assert registry._spare.wait()  # the spare started after the restart finished booting
        children = [registry._worker.process, registry._spare._child.process]
        registry.close()
        assert all(child.poll() is not None for child in children)  # the child and the spare are gone
        assert registry.call("focus_qupath", {}).error["code"] == VIEWER_UNAVAILABLE

    records = read_trace(tmp_path / "trace.jsonl")
    crash = next(record for record in records if record["kind"] == VIEWER_CRASHED)
    assert crash["actor"] == "system" and crash["payload"]["exit"] == "killed by SIGSEGV"
    assert crash["payload"]["restored"] is True and crash["payload"]["replayed_actions"] == 4
    assert crash["payload"]["spare_used"] is True  # the viewer booted in the background took over
    assert crash["payload"]["arguments"]["label"] == "CRASH:segv"
    assert "Segmentation fault" in (tmp_path / "viewer" / "worker.log").read_text()  # faulthandler's stack
    assert verify_trace(tmp_path / "trace.jsonl").ok
    replayed = replay_trace(tmp_path / "trace.jsonl", [slide_root])
    assert replayed.ok, replayed.message


# ------------------------------------------------------------------------------------------ the real front-ends
def front_end(*arguments: str) -> list[str]:
    """``medopenclaw ARGS`` whose supervisor launches the crashing worker (crashing_front_end.py), without the spare
    viewer: a restart from it is the in-process tests' (``spare_used``), a front-end's answer is the same either
    way, and each spare is a viewer's start-up of CPU."""
    return [sys.executable, str(DOUBLES / "crashing_front_end.py"), *arguments, "--no-spare-viewer"]


def test_rest_serve_answers_viewer_crashed_over_a_real_socket_in_its_shared_and_own_sessions(
        tmp_path, slide_root, slide_path):
    """`medopenclaw serve`: two clients, each in a session of its own (own viewer process, scene and trace file),
    do not see each other's state nor the shared session's; a crash in one session leaves the other untouched.
    Then a crash of the shared session's viewer: the server lives on and the shared session is restored. One
    server for both: the shared session's viewer boots either way. Whole-slide viewers, five processes in all."""
    trace = tmp_path / "rest.jsonl"
    env = {**os.environ, "MEDOPENCLAW_TOKEN": "session-token"}
    server = subprocess.Popen(front_end("serve", "--data-root", str(slide_root), "--port", "0", "--trace", str(trace),
                                        "--max-sessions", "2"),
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    try:
        url = server.stdout.readline().split(" on ")[1].split()[0]
        token = {"Authorization": "Bearer session-token"}
        first, second = ({**token, "MedOpenClaw-Session": requests.post(f"{url}/v1/sessions", headers=token,
                                                                         timeout=60).json()["session"]}
                         for _ in range(2))

        def post(headers, name, **arguments):
            return requests.post(f"{url}/v1/actions/{name}", headers=headers, json=arguments, timeout=60).json()

        def image(headers) -> dict | None:
            return post(headers, "focus_qupath")["data"]["state"]["image"]

        assert post(first, "load_image", image_path=slide_path)["ok"]
        assert image(second) is None
        assert post(first, "record_view_as_evidence", label="CRASH:segv")["error"]["code"] == VIEWER_CRASHED
        assert image(first)["path"] == slide_path  # restored from its own trace
        assert image(second) is None
        assert requests.get(f"{url}/v1/state", headers=token, timeout=60).json()["viewer"]["image"] is None

        # the shared session (no session header)
        assert post(token, "load_image", image_path=slide_path)["ok"]
        assert post(token, "record_view_as_evidence", label="before")["ok"]
        before = requests.get(f"{url}/v1/state", headers=token, timeout=10).json()
        crashed = post(token, "record_view_as_evidence", label="CRASH:segv")
        assert crashed["ok"] is False and crashed["error"]["code"] == VIEWER_CRASHED
        assert server.poll() is None  # the server lives on
        assert requests.get(f"{url}/v1/state", headers=token, timeout=10).json() == before
        assert before["evidence"]["recorded_views"] == 1  # "before", not the call that crashed
        kinds = [record["kind"] for record in requests.get(f"{url}/v1/trace", headers=token, timeout=10).json()]
        assert VIEWER_CRASHED in kinds
    finally:
        server.terminate()
        server.wait(timeout=30)
    # SIGTERM closed the sessions as Ctrl-C does: no viewer of theirs (all under tmp_path) outlives the server
    assert server.returncode == 0 and not running_with(str(tmp_path))
    actions = [[record.get("action") for record in read_trace(tmp_path / f"rest.client{number}.jsonl")
                if record.get("action")] for number in (1, 2)]
    assert actions == [["load_image", "focus_qupath"], ["focus_qupath", "focus_qupath"]]
    assert read_trace(tmp_path / "rest.client2.jsonl")[0]["payload"]["session"] == 2
    assert verify_trace(trace).ok and replay_trace(trace, [slide_root]).ok


def test_mcp_stdio_serves_the_pathology_viewer_and_answers_viewer_crashed_with_the_official_client(
        tmp_path, slide_root, slide_path):
    """`medopenclaw mcp` over stdio with the SDK's client, the viewer chosen by the data root (slides, no volumes):
    the QuPath-style actions, listed and called on a slide (test_mcp_sdk.py's protocol checks on slides, one server
    for both). Then a crash: the crashing call recorded its view before dying, so the restored session holds none
    and the next one is the first (whole-slide viewers, as the REST front-end's test)."""
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    trace = tmp_path / "mcp.jsonl"
    command = front_end("mcp", "--data-root", str(slide_root), "--trace", str(trace))
    parameters = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))

    async def session() -> list:
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as client:
            init = await client.initialize()
            assert "whole-slide" in init.instructions
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) == {entry["name"] for entry in apps.entries("pathology", "A")}
            assert "open_case" not in tools and tools["zoom"].input_schema["required"] == ["amount"]
            loaded = await client.call_tool("load_image", {"image_path": slide_path})
            assert not loaded.is_error and loaded.structured_content["data"]["state"]["image"]
            zoomed = await client.call_tool("zoom", {"direction": "in", "amount": 4})
            assert not zoomed.is_error
            captured = await client.call_tool("capture_viewer", {"label": "red region"})
            assert [block.type for block in captured.content] == ["text", "image"]
            assert base64.b64decode(captured.content[1].data).startswith(b"\x89PNG")
            point = await client.call_tool("viewer_point_to_wsi_coordinate", {"x": 500, "y": 500})
            assert point.structured_content["data"]["inside_slide"] is True
            refused = await client.call_tool("load_image", {"image_path": "/etc/passwd"})
            assert refused.is_error and refused.structured_content["error"]["code"] == "path_not_allowed"
            return [await client.call_tool("record_view_as_evidence", {"label": label})
                    for label in ("CRASH:segv", "after")]

    crashed, recorded = anyio.run(session)
    assert crashed.is_error and not recorded.is_error
    assert json.loads(crashed.content[0].text)["error"]["code"] == VIEWER_CRASHED
    assert json.loads(recorded.content[0].text)["data"]["recorded_view"]["index"] == 0
    actions = [record["action"] for record in read_trace(trace) if record.get("action")]
    assert actions == ["load_image", "zoom", "capture_viewer", "viewer_point_to_wsi_coordinate", "load_image",
                       "record_view_as_evidence"]
    assert verify_trace(trace).ok and replay_trace(trace, [slide_root]).ok


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")
def test_closing_a_session_still_booting_returns_once_its_viewer_is_gone(tmp_path, data_root):
    """A session closed while its viewer boots in the background stops that child before close() returns: a slot
    freed after close() never leaves a viewer behind (30 POST/DELETE cycles with --max-sessions 1 peaked at 18-19
    viewers). Closed right after it opened (most often before its boot launched the child) it launches none; closed
    once its child runs, the child is killed mid-boot."""
    launched = []

    def command(ready_file: str) -> list[str]:
        launched.append(ready_file)
        return crashing_worker.command(ready_file)

    def booting(name: str) -> SupervisedRegistry:
        return SupervisedRegistry("radiology", [data_root], trace=AuditTrace(tmp_path / f"{name}.jsonl"),
                                  workdir=tmp_path / name, command=command, background=True)

    at_once = booting("at_once")
    at_once.close()
    running = booting("running")
    while not (launched and running_with(launched[-1])) and not running._booted.wait(0.01):
        pass  # until its child runs (a viewer's boot takes seconds)
    running.close()
    for registry in (at_once, running):
        assert registry._booted.is_set()  # the boot is over, not still starting a viewer behind a freed slot
        assert registry.call("observe", {}).error["code"] == VIEWER_UNAVAILABLE
    assert launched and not any(running_with(ready_file) for ready_file in launched)

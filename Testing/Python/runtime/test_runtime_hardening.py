"""Regression tests for the hardening issue: argument hygiene, the registry's catch-all audit, the one path
resolver (and its confined directory scan), clear errors for bad paths, full-match names, replay of refused
calls. Each test reproduces one reported one-call failure through the public registry."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import pytest
from runtime_data import (
    call_error,
    call_ok,
    lesion_center_ras,
    oblique_lps_affine,
    phantom,
    write_dicom_series,
    write_nifti,
)

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.core.audit import AuditTrace, read_trace, state_at, verify_trace
from MedOpenClawLib.core.hygiene import MAX_DEPTH, check_arguments
from MedOpenClawLib.core.policy import DataRootPolicy, SessionPolicy
from MedOpenClawLib.core.registry import ActionRegistry
from MedOpenClawLib.core.result import ActionError, Result
from MedOpenClawLib.core.toolset import Toolset
from MedOpenClawLib.replay import images_without_pixels, replay_trace

FORMAT_LABELS = ["%s", "%n", "%s%s%s%s%n", "%N-%d %x %p"]


@pytest.fixture()
def session(tmp_path, data_root):
    trace = AuditTrace(tmp_path / "trace" / "episode.jsonl")
    registry = build_slicer_registry([data_root], trace=trace, artifacts_dir=tmp_path / "artifacts")
    call_ok(registry, "open_case", dicom_dir=str(data_root), size=64)
    call_ok(registry, "jump", ras=lesion_center_ras(oblique_lps_affine()).tolist(), size=64)
    return registry


def last_record(registry) -> dict:
    return registry.trace.records[-1]


def test_printf_directives_in_labels_reach_no_format_string(tmp_path, data_root):
    """Item 1: Slicer splices a markups node's name into ``%N-%d`` and passes it to snprintf as the format; a
    label used as the name crashed the process (SIGSEGV). Run in a child so a regression fails, not aborts."""
    script = textwrap.dedent(f"""
        import json, sys
        from MedOpenClawLib.apps.radiology import build_slicer_registry
        registry = build_slicer_registry([{str(data_root)!r}])
        assert registry.call("open_case", {{"dicom_dir": {str(data_root)!r}, "size": 64}}).ok
        centre = registry.call("image_coords_to_ras", {{"view": "axial", "point_1000": [500, 500]}}).data["ras"]
        outcomes = []
        for label in {FORMAT_LABELS!r}:
            calls = [("record_point", {{"ras": centre}}),
                     ("draw_roi", {{"view": "axial", "shape": "box", "bbox_1000": [450, 450, 550, 550]}}),
                     ("draw_roi", {{"view": "axial", "shape": "circle", "center_1000": [500, 500],
                                   "radius_1000": 30}}),
                     ("measure_line", {{"view": "axial", "start_1000": [480, 480], "end_1000": [520, 520]}})]
            for name, arguments in calls:
                result = registry.call(name, {{**arguments, "label": label, "size": 64}}
                                       if name != "record_point" else {{**arguments, "label": label}})
                outcomes.append(result.ok)
        labels = [item.label for item in registry.context.evidence.items]
        print(json.dumps({{"ok": outcomes, "labels": labels}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(report["ok"])
    assert report["labels"] == [label for label in FORMAT_LABELS for _ in range(4)]


def test_markups_keep_the_label_as_plain_text(session):
    result = call_ok(session, "record_point", ras=lesion_center_ras(oblique_lps_affine()).tolist(),
                     label="50% stenosis %s")
    item = session.context.evidence.items[-1]
    node = session.context.engine.scene.GetNodeByID(item.node_id)
    assert item.label == "50% stenosis %s" and result.data["evidence_id"] == item.id
    assert node.GetNthControlPointLabel(0) == "50% stenosis %s"
    assert node.GetAttribute("MedOpenClaw.label") == "50% stenosis %s"
    assert "%" not in node.GetName()


@pytest.mark.parametrize("action", ["bookmark_view", "record_point", "draw_roi", "measure_line"])
def test_lone_surrogate_label_is_refused_before_anything_changes(session, action):
    """Item 2: ``"\\ud800"`` aborted the process on markups and, on bookmark_view, escaped registry.call
    after the evidence item was added."""
    arguments = {
        "bookmark_view": {"view": "axial"},
        "record_point": {"ras": lesion_center_ras(oblique_lps_affine()).tolist()},
        "draw_roi": {"view": "axial", "shape": "box", "bbox_1000": [400, 400, 600, 600]},
        "measure_line": {"view": "axial", "start_1000": [400, 400], "end_1000": [600, 600]},
    }[action]
    result = call_error(session, action, "invalid_argument", **arguments, label="lesion \ud800")
    assert "surrogate" in result.error["message"]
    assert last_record(session)["status"] == "error" and last_record(session)["action"] == action
    assert verify_trace(session.trace.path).ok


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 900, 100_000])
def test_deep_nesting_is_refused_iteratively_and_audited(session, depth):
    """Item 3: arguments nested >= ~500 levels raised RecursionError out of registry.call, unaudited."""
    nested: list = []
    for _ in range(depth - 1):
        nested = [nested]
    count = session.trace.count
    result = call_error(session, "observe", "invalid_argument", view=nested)
    assert "nested deeper" in result.error["message"]
    assert session.trace.count == count + 1
    assert last_record(session)["arguments"] == {"refused_input": "<dict of 1 items>"}
    assert verify_trace(session.trace.path).ok


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 10**400, "x" * 5000,
                                   "a\x00b", "a\x1bb", "a\x85b", {"k\ud800": 1}, b"bytes", {1, 2}])
def test_hygiene_refuses_values_json_admits_but_the_runtime_cannot_hold(value):
    with pytest.raises(ActionError) as refused:
        check_arguments({"value": value})
    assert refused.value.code == "invalid_argument" and len(refused.value.message) < 300


def test_hygiene_accepts_ordinary_arguments():
    check_arguments({"ras": [1.5, -2, 3e10], "label": "Läsion 50% — ok", "flag": True, "none": None,
                     "points": [[0, 0], [999, 999]]})


class Scratch:
    """A minimal context whose state a handler can change, so rollback is observable."""

    def __init__(self):
        self.policy = SessionPolicy()
        self.value = 0

    def state(self) -> dict:
        return {"value": self.value}

    def checkpoint(self):
        return self.value

    def rollback(self, token) -> None:
        self.value = token


def scratch_registry(tmp_path, trace: AuditTrace | None = None) -> ActionRegistry:
    tools = Toolset("scratch")

    def change(ctx, returns: str = "ok") -> Result:
        ctx.value += 1
        if returns == "recursion":
            raise RecursionError("maximum recursion depth exceeded")
        if returns == "cancelled":
            raise asyncio.CancelledError()  # a BaseException, not an Exception
        if returns == "surrogate":
            return Result(ok=True, data={"echo": "\ud800"})
        if returns == "nan":
            return Result(ok=True, data={"mean": float("nan")})
        if returns == "not_a_result":
            return {"ok": True}
        return Result(ok=True, data={"value": ctx.value})

    tools.action("change", "viewer", "Change the scratch state.", {"returns": {"type": "string"}})(change)
    return ActionRegistry(Scratch(), [tools], trace or AuditTrace(tmp_path / "scratch.jsonl"))


@pytest.mark.parametrize("returns, code", [("recursion", "internal_error"), ("cancelled", "internal_error"),
                                           ("surrogate", "unencodable_text"),
                                           ("nan", "non_finite_result"), ("not_a_result", "internal_error")])
def test_registry_call_never_raises_and_always_audits_with_rollback(tmp_path, returns, code):
    """Item 2/3: a handler's exception, or an outcome the trace cannot hold (text that is not Unicode, a NaN),
    is answered as an error, undone and audited."""
    registry = scratch_registry(tmp_path)
    assert registry.call("change", {}).ok and registry.context.value == 1
    result = registry.call("change", {"returns": returns})
    assert not result.ok and result.error["code"] == code
    assert registry.context.value == 1, "the change was not rolled back"
    records = read_trace(registry.trace.path)
    assert records[-1]["status"] == "error" and state_at(records, records[-1]["seq"]) == {"value": 1}
    assert verify_trace(registry.trace.path).ok


@pytest.mark.parametrize("returns, code", [("surrogate", "unencodable_text"), ("nan", "non_finite_result")])
def test_a_supervised_viewers_unchained_trace_undoes_what_the_real_trace_could_not_hold(tmp_path, returns, code):
    """A supervised viewer keeps its last record alone, neither hashed nor delta-encoded (its supervisor chains the
    real trace), yet still fails on what the real trace could not hold: the viewer undoes the call itself, instead
    of the supervisor restarting it; the record carries the full state the supervisor takes over."""
    trace = AuditTrace(None, window=1, chained=False)
    registry = scratch_registry(tmp_path, trace)
    assert registry.call("change", {}).ok and registry.context.value == 1
    result = registry.call("change", {"returns": returns})
    assert not result.ok and result.error["code"] == code
    assert registry.context.value == 1, "the change was not rolled back"
    assert trace.records[-1]["status"] == "error" and trace.records[-1]["state"] == trace.last_state == {"value": 1}
    assert "hash" not in trace.records[-1] and len(trace.records) <= 2
    with pytest.raises(ValueError, match="stays in memory"):
        AuditTrace(tmp_path / "unchained.jsonl", chained=False)


def test_unhashable_names_and_actors_are_errors_not_exceptions(tmp_path):
    registry = scratch_registry(tmp_path)
    assert registry.call(["change"], {}).error["code"] == "unknown_action"
    assert registry.call("change", {}, actor=["agent"]).error["code"] == "invalid_actor"
    assert registry.call("x" * 10_000, {}).error["message"].count("x") < 100
    assert verify_trace(registry.trace.path).ok


def escape_layout(tmp_path):
    """A data root whose folders hold links to a NIfTI file and a DICOM series outside it."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "case").mkdir(parents=True)
    outside.mkdir()
    write_nifti(outside / "secret.nii.gz", phantom(1), oblique_lps_affine())
    write_dicom_series(outside / "series", phantom(2)[:, :, :4], oblique_lps_affine(), description="SECRET")
    (root / "case" / "linked.nii.gz").symlink_to(outside / "secret.nii.gz")
    (root / "case" / "series").symlink_to(outside / "series", target_is_directory=True)
    (root / "dicom").mkdir()
    for file in sorted((outside / "series").iterdir()):
        (root / "dicom" / file.name).symlink_to(file)
    (root / "loop").symlink_to(root / "loop")
    return root


@pytest.mark.parametrize("opened", ["case", "dicom", "."])
def test_directory_scans_never_follow_links_out_of_the_data_root(tmp_path, opened):
    """Item 4: open_case on a directory inside the root loaded linked NIfTI files and DICOM series outside."""
    root = escape_layout(tmp_path)
    registry = build_slicer_registry([root])
    result = call_error(registry, "open_case", "no_volumes", dicom_dir=str(root / opened) if opened != "." else ".")
    assert "skipped" in result.error["message"]
    assert registry.context.engine.volume_nodes() == []


def test_scan_skips_and_counts_outside_entries_but_loads_the_inside_ones(tmp_path):
    root = escape_layout(tmp_path)
    write_nifti(root / "case" / "inside.nii.gz", phantom(3), oblique_lps_affine())
    (root / "case" / "alias.nii.gz").symlink_to(root / "case" / "inside.nii.gz")  # a link inside is fine
    registry = build_slicer_registry([root])
    result = call_ok(registry, "open_case", dicom_dir=str(root / "case"), size=64)
    assert sorted(result.data["loaded"]) == ["alias", "inside"]
    assert result.data["skipped_entries"] == 2 and result.data["warnings"][0]["code"] == "entries_skipped"
    listing = DataRootPolicy([root]).scan(root)
    assert all(DataRootPolicy([root]).allows(path.resolve()) for path in listing.files)
    assert listing.skipped >= 2 + 4 + 1  # case links, the four linked DICOM files, the loop


def test_pathology_case_folder_scan_is_confined(tmp_path):
    from MedOpenClawLib.pathology.cases import resolve_case_image

    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "case").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.svs").write_bytes(b"II*\x00")
    (root / "case" / "slide.svs").symlink_to(outside / "secret.svs")
    with pytest.raises(ActionError) as refused:
        resolve_case_image(str(root / "case"), None, DataRootPolicy([root]))
    assert refused.value.code == "invalid_case"


@pytest.mark.parametrize("path, code", [("/data/a\x00b.nii", "invalid_argument"),
                                        ("x" * 300 + ".nii.gz", "invalid_path"),
                                        ("x" * 5000, "invalid_argument")])
def test_bad_paths_are_clear_errors(session, path, code):
    """Item 6: a NUL byte and a name over NAME_MAX ended as internal_error."""
    call_error(session, "open_case", code, dicom_dir=path)


def test_pathology_paths_get_the_same_clear_errors(tmp_path):
    from MedOpenClawLib.pathology.actions import build_pathology_registry
    from MedOpenClawLib.pathology.viewer import HeadlessWsiViewer

    registry = build_pathology_registry([tmp_path], viewer=HeadlessWsiViewer((256, 256)))
    assert registry.call("load_image", {"image_path": "a\x00b.svs"}).error["code"] == "invalid_argument"
    assert registry.call("load_image", {"image_path": "y" * 300}).error["code"] == "invalid_path"
    assert registry.call("load_case", {"case_path": "/etc"}).error["code"] == "path_not_allowed"


def test_import_dicom_seg_of_a_non_dicom_file_is_a_clear_error(tmp_path, data_root):
    (data_root / "notes.dcm").write_text("not a DICOM file")
    registry = build_slicer_registry([data_root], track="B")
    call_ok(registry, "open_case", dicom_dir=str(data_root / "CT.nii.gz"), size=64)
    result = call_error(registry, "import_dicom_seg", "unreadable_dicom", path=str(data_root / "notes.dcm"),
                        volume_name="CT")
    assert "notes.dcm" in result.error["message"]


def test_names_use_full_match_semantics(session):
    """Item 8: ``^...$`` let ``"x\\n"`` through (``$`` matches before a final newline)."""
    before = session.context.state()
    assert session.call("export_evidence", {"name": "x\n"}).error["code"] == "invalid_argument"
    assert session.context.state() == before
    action = session.get("export_evidence")
    assert list(action.validator.iter_errors({"name": "x\n"}))  # the schema alone refuses it too
    assert not list(action.validator.iter_errors({"name": "final-1"}))


def test_refusals_echo_a_bounded_preview_of_the_input(session):
    """Item 8: a 1 MB label refusal echoed the whole label."""
    for label in ("a" * (1 << 20), "b" * 1000):
        message = call_error(session, "bookmark_view", "invalid_argument", view="axial", label=label).error["message"]
        assert len(message) < 300


def test_replay_of_refused_calls_matches(tmp_path, session, data_root):
    """Item 9: a call whose arguments were ``[]`` was replayed as ``{}`` and reported a false mismatch."""
    assert session.call("observe", []).error["code"] == "invalid_argument"
    assert session.call("observe", {"view": [[[[]]]] * 2}).error["code"] == "invalid_argument"
    assert session.call("jump", {"ras": [float("nan"), 0, 0]}).error["code"] == "invalid_argument"
    report = replay_trace(session.trace.path, [data_root])
    assert report.ok, report.message


def zooms(session, factor: float, count: int) -> Result:
    """``count`` zoom calls; all but the last render the geometry alone (what the field of view is read from, as
    in a replay), the last its pixels too: 240 reslices were 2.3 s of the test's 4 s of CPU."""
    with images_without_pixels(session):
        for _ in range(count - 1):
            call_ok(session, "zoom", view="axial", factor=factor, size=64)
    result = call_ok(session, "zoom", view="axial", factor=factor, size=64)
    assert result.images[0].pixels is not None
    return result


def test_field_of_view_is_bounded_by_the_volume_extent(session):
    """Item 5: 237 valid zooms of factor 0.051 made the field of view Infinity."""
    smallest, largest = session.context.engine.field_of_view_limits(session.context.engine.find_volume())
    result = zooms(session, 0.051, 240)
    assert max(result.data["field_of_view_mm"]) <= largest * 1.001
    assert result.data["warnings"] == [{"code": "zoom_limit", "message": "zoom-out limit reached"}]
    result = zooms(session, 20, 240)
    assert min(result.data["field_of_view_mm"]) >= smallest * 0.999
    assert json.loads(json.dumps(session.context.state(), allow_nan=False))


@pytest.mark.parametrize("action, arguments", [
    ("zoom", {"view": "axial", "factor": float("nan")}),
    ("zoom", {"view": "axial", "factor": 2, "center_1000": [float("inf"), 1]}),
    ("jump", {"ras": [float("nan"), 0, 0]}),
    ("record_point", {"ras": [0, float("inf"), 0]}),
    ("measure_line", {"start_ras": [0, 0, 0], "end_ras": [float("nan"), 0, 0]}),
    ("wl", {"window": float("inf")}),
    ("wl", {"level": float("nan")}),
    ("fusion", {"background_volume_ref": "CT", "foreground_opacity": float("nan")}),
    ("draw_roi", {"view": "axial", "shape": "circle", "center_1000": [500, 500], "radius_1000": float("nan")}),
    ("open_case", {"dicom_dir": "CT.nii.gz", "spacing": float("inf")}),
])
def test_non_finite_numbers_never_reach_the_scene(session, action, arguments):
    """Item 5: NaN/Infinity passed the schemas and ended in the state, the evidence and the trace."""
    call_error(session, action, "invalid_argument", **arguments)


def test_jump_with_nan_while_a_markup_exists_is_a_clear_error(session):
    call_ok(session, "record_point", ras=lesion_center_ras(oblique_lps_affine()).tolist(), label="p")
    call_error(session, "jump", "invalid_argument", ras=[float("nan"), 0.0, 0.0])


def test_the_supervised_worker_passes_arguments_as_sent(tmp_path, data_root):
    """Item 9 through ``serve``/``mcp``: the viewer child turned ``[]`` into ``{}`` and ran the call."""
    from MedOpenClawLib.worker.service import WorkerService

    service = WorkerService()
    service.handle({"op": "start", "viewer": "radiology", "data_roots": [str(data_root)], "track": "A",
                    "trace_path": str(tmp_path / "worker.jsonl")})
    answer = service.handle({"op": "call", "name": "ping", "arguments": []})
    assert answer["ok"] is False and answer["error"]["code"] == "invalid_argument"
    assert service.handle({"op": "call", "name": "ping", "arguments": None})["ok"] is True


def test_unencodable_audit_extras_do_not_undo_a_valid_call(tmp_path):
    """Model text with a lone surrogate travels in ``audit_extra`` (receipts): the call still stands."""
    registry = scratch_registry(tmp_path)
    result = registry.call("change", {}, audit_extra={"raw_model_output": "tool call \ud800"}, round_id=float("nan"))
    assert result.ok and registry.context.value == 1
    record = read_trace(registry.trace.path)[-1]
    assert record["status"] == "ok" and record["extra"]["unrecordable"] == "UnicodeEncodeError"
    assert verify_trace(registry.trace.path).ok


@pytest.mark.parametrize("layout", ["linked_folder", "linked_file", "vms"])
def test_multi_file_slides_cannot_read_companions_outside_the_roots(tmp_path, layout):
    """MIRAX (.mrxs + data folder) and Hamamatsu VMS name further files OpenSlide reads: each must resolve inside."""
    from MedOpenClawLib.pathology.actions import build_pathology_registry
    from MedOpenClawLib.pathology.viewer import HeadlessWsiViewer

    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "case").mkdir(parents=True)
    (outside / "data").mkdir(parents=True)
    (outside / "data" / "Data0000.dat").write_bytes(b"\0" * 16)
    if layout == "linked_folder":
        (root / "case" / "slide.mrxs").write_text("[GENERAL]\n")
        (root / "case" / "slide").symlink_to(outside / "data", target_is_directory=True)
        slide = root / "case" / "slide.mrxs"
    elif layout == "linked_file":
        (root / "case" / "slide.mrxs").write_text("[GENERAL]\n")
        (root / "case" / "slide").mkdir()
        (root / "case" / "slide" / "Data0000.dat").symlink_to(outside / "data" / "Data0000.dat")
        slide = root / "case" / "slide.mrxs"
    else:
        slide = root / "case" / "slide.vms"
        slide.write_text(f"[Virtual Microscope Specimen]\nImageFile={outside / 'data' / 'Data0000.dat'}\n")
    registry = build_pathology_registry([root], viewer=HeadlessWsiViewer((256, 256)))
    for name, arguments in (("load_image", {"image_path": str(slide)}), ("load_case", {"case_path": str(slide)})):
        result = registry.call(name, arguments)
        assert result.error["code"] == "path_not_allowed" and "companion" in result.error["message"]


def test_served_sessions_keep_a_bounded_window_of_records(data_root):
    """Item 9: ``serve`` (and ``mcp``) kept every record in memory (~8.5 KiB per call, unbounded)."""
    import argparse

    from MedOpenClawLib.server.sessions import TRACE_WINDOW, session_registry

    args = argparse.Namespace(in_process=True, trace=None, data_root=[str(data_root)], track="A", max_rounds=None,
                              app="radiology")
    registry = session_registry(args, header={"front_end": "test"}, save_images=False)
    assert registry.trace.window == TRACE_WINDOW
    # the served calls trim that window whatever its size: 8 records pass it twice over in 21 calls, not 2005
    window = registry.trace.window = 8
    for _ in range(2 * window + 5):
        registry.call("ping", {})
    assert len(registry.trace.records) <= 2 * window and registry.trace.count == 2 * window + 7

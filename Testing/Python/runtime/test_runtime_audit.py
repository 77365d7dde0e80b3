"""Audit trace: hash chain, tamper detection, replay of a 30-action episode, CLI exit codes."""

from __future__ import annotations

import json
import shutil

import pytest
from runtime_data import lesion_center_ras, oblique_lps_affine, phantom, write_nifti

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.cli import main
from MedOpenClawLib.core.audit import (
    AuditTrace,
    action_states,
    anchor_path,
    read_anchor,
    read_trace,
    record_hash,
    verify_trace,
)

THIRTY_ACTIONS = [
    ("ping", {}), ("select_volume", {"volume_name": "T1c"}), ("observe", {"size": 128}),
    ("get_slice_offset_range", {"view": "axial"}), ("set_slice_offset", {"view": "axial", "offset": 5.0}),
    ("scroll", {"view": "axial", "direction": "up", "num_slices": 3, "size": 128}),
    ("scroll", {"view": "coronal", "direction": "down", "num_slices": 2, "output": "cine"}),
    ("zoom", {"view": "sagittal", "factor": 1.5, "center_1000": [400, 600], "size": 128}),
    ("fit", {"view": "sagittal", "size": 128}), ("jump", {"ras": "LESION", "size": 128}),
    ("image_coords_to_ras", {"view": "axial", "point_1000": [500, 500]}),
    ("image_coords_to_ras", {"view": "coronal", "bbox_1000": [450, 450, 550, 550]}),
    ("wl", {"window": 300, "level": 200, "size": 128}), ("window_preset", {"preset": "mr_auto", "size": 128}),
    ("select_volume", {"volume_name": "FLAIR", "size": 128}),
    ("fusion", {"background_volume_ref": "FLAIR", "foreground_volume_ref": "T1c", "foreground_opacity": 0.3}),
    ("set_layout", {"layout": "one_up_axial", "size": 128}), ("observe", {"include_metadata": True, "size": 128}),
    ("record_point", {"ras": "LESION", "label": "lesion"}), ("record_key_slices", {}),
    ("draw_roi", {"view": "axial", "shape": "box", "bbox_1000": [420, 420, 580, 580], "size": 128}),
    ("measure_line", {"view": "axial", "start_1000": [420, 500], "end_1000": [580, 500], "size": 128}),
    ("bookmark_view", {"view": "axial"}), ("list_evidence", {}),
    ("set_slice_offset", {"view": "axial", "offset": 9999}),  # recorded failure, replayed as failure
    ("set_layout", {"layout": "conventional", "size": 128}),
    ("recover_standard_views", {"volume_name": "T1c", "size": 128}),
    ("get_viewer_state", {}), ("fusion", {"background_volume_ref": "T1c", "foreground_volume_ref": None}),
    ("observe", {"view": "coronal", "size": 128}),
]


def record_thirty_actions(base):
    """The thirty-action episode over two phantom volumes in ``base``: (its trace, its data root)."""
    root = base / "data"
    root.mkdir()
    write_nifti(root / "T1c.nii.gz", phantom(1), oblique_lps_affine())
    write_nifti(root / "FLAIR.nii.gz", phantom(2), oblique_lps_affine())
    path = base / "trace" / "episode.jsonl"
    registry = build_slicer_registry([root], trace=AuditTrace(path, save_images=True))
    assert registry.call("open_case", {"dicom_dir": str(root), "size": 128}).ok
    lesion = lesion_center_ras(oblique_lps_affine()).round(2).tolist()
    for name, arguments in THIRTY_ACTIONS:
        arguments = {key: (lesion if value == "LESION" else value) for key, value in arguments.items()}
        registry.call(name, arguments)
    return path, root


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """The episode recorded once for the module (about 0.5 s of CPU each time), not once per test."""
    return record_thirty_actions(tmp_path_factory.mktemp("recording"))


@pytest.fixture()
def recorded(recording, tmp_path):
    """The module's recording with a trace folder of this test's own (tests tamper with the trace, its images and
    its anchor); the data root is shared, and read only."""
    path, root = recording
    shutil.copytree(path.parent, tmp_path / "trace")
    return tmp_path / "trace" / path.name, root


def rewrite(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records))


def test_trace_records_every_action_with_state_and_artifacts(recorded):
    path, _ = recorded
    records = read_trace(path)
    actions = [record for record in records if record["kind"] == "action"]
    assert len(actions) == 31
    assert [record["kind"] for record in records[:2]] == ["session_start", "session_config"]
    assert all(("state" in record or "state_delta" in record) and record["hash"] == record_hash(record)
               for record in actions)
    assert all(isinstance(state, dict) and state.get("views") for _, state in action_states(records))
    failed = [record for record in actions if record["status"] == "error"]
    assert [(record["action"], record["error"]["code"]) for record in failed] == [("set_slice_offset",
                                                                                    "out_of_range")]
    assert any(artifact["kind"] == "image" for record in actions for artifact in record["artifacts"])
    assert verify_trace(path).ok


def test_replay_of_a_thirty_action_trace_matches(recorded, capsys):
    path, root = recorded
    assert main(["replay", str(path), "--data-root", str(root)]) == 0
    assert json.loads(capsys.readouterr().out)["actions"] == 31


def test_replay_reports_first_differing_snapshot(tmp_path, capsys):
    path, root = record_thirty_actions(tmp_path)  # a recording of its own: this test changes the data
    records = read_trace(path)
    write_nifti(root / "FLAIR.nii.gz", phantom(2)[:, :, :20], oblique_lps_affine())  # the data changed
    assert main(["replay", str(path), "--data-root", str(root)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["first_mismatch_seq"] == records[2]["seq"]  # open_case: FLAIR has other bounds now
    assert report["message"].startswith("open_case: ") and report["expected"] != report["actual"]


@pytest.mark.parametrize("tamper", ["modify", "remove", "reorder", "artifact"])
def test_trace_verify_detects_tampering(recorded, tamper, capsys):
    path, _ = recorded
    records = read_trace(path)
    if tamper == "modify":
        records[5]["arguments"] = {"view": "sagittal", "offset": 1.0}
    elif tamper == "remove":
        del records[7]
    elif tamper == "reorder":
        records[8], records[9] = records[9], records[8]
    rewrite(path, records)
    if tamper == "artifact":
        image = next(a for r in records for a in r.get("artifacts", []) if a["kind"] == "image")
        (path.parent / image["path"]).write_bytes(b"\x89PNG not the original")
    assert main(["trace", "verify", str(path)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert not report["ok"] and report["first_bad_seq"] is not None


@pytest.mark.parametrize("removed", [1, 3])
def test_trace_verify_detects_records_removed_from_the_end(recorded, capsys, tmp_path, removed):
    """The chain of a shortened trace is intact; only the anchor (sidecar, result.json or --expect-*) shows it."""
    path, _ = recorded
    records = read_trace(path)
    anchor = read_anchor(path)
    assert anchor == {"records": len(records), "head": records[-1]["hash"]}
    rewrite(path, records[:-removed])
    assert main(["trace", "verify", str(path)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert not report["ok"] and report["anchored"] and "removed" in report["message"]
    anchor_path(path).unlink()  # without the sidecar, the episode's result.json or the caller still knows
    result_json = tmp_path / "result.json"
    result_json.write_text(json.dumps({"trace": path.name, "trace_anchor": anchor}))
    assert main(["trace", "verify", str(path), "--anchor", str(result_json)]) == 1
    assert main(["trace", "verify", str(path), "--expect-head", anchor["head"]]) == 1
    assert main(["trace", "verify", str(path), "--expect-records", str(len(records))]) == 1
    capsys.readouterr()
    assert main(["trace", "verify", str(path)]) == 0  # nothing to compare with: chain intact, not anchored
    assert json.loads(capsys.readouterr().out)["anchored"] is False


def test_in_memory_window_is_bounded_while_the_file_keeps_everything(tmp_path):
    trace = AuditTrace(tmp_path / "serve.jsonl", window=10)
    for index in range(100):
        trace.record_event("note", {"index": index})
    assert len(trace.records) <= 20 and trace.records[-1]["payload"] == {"index": 99}
    assert trace.count == 101 and len(read_trace(tmp_path / "serve.jsonl")) == 101
    assert trace.records[-1]["seq"] == 100
    assert verify_trace(tmp_path / "serve.jsonl").ok


def test_untampered_trace_verifies_on_the_command_line(recorded, capsys):
    path, _ = recorded
    assert main(["trace", "verify", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]


def test_credentials_never_reach_the_trace(tmp_path):
    trace = AuditTrace(tmp_path / "t.jsonl")
    trace.record_event("model_request", {"api_key": "sk-secret", "headers": {"Authorization": "Bearer x"},
                                         "usage": {"input_tokens": 12}})
    text = (tmp_path / "t.jsonl").read_text()
    assert "sk-secret" not in text and "Bearer x" not in text and '"input_tokens":12' in text


def test_replay_of_a_pathology_trace_uses_the_recorded_viewport(tmp_path, capsys):
    from pathology_slides import DOWNSAMPLES, MPP, SLIDE_SIZE, paint_regions

    from MedOpenClawLib.pathology.actions import build_pathology_registry
    from MedOpenClawLib.pathology.pyramid_tiff import write_pyramidal_tiff
    from MedOpenClawLib.pathology.viewer import HeadlessWsiViewer

    root = tmp_path / "slides"
    root.mkdir()
    slide = root / "slide.tif"
    write_pyramidal_tiff(slide, *SLIDE_SIZE, paint_regions, DOWNSAMPLES, tile=256, mpp=MPP)
    path = tmp_path / "trace" / "wsi.jsonl"
    registry = build_pathology_registry([root], trace=AuditTrace(path), viewer=HeadlessWsiViewer((640, 480)))
    for name, arguments in [("load_image", {"image_path": str(slide)}), ("zoom", {"amount": 2, "x": 300, "y": 700}),
                            ("pan", {"direction": "right", "amount": 0.25}),
                            ("viewer_point_to_wsi_coordinate", {"x": 500, "y": 500}),
                            ("record_view_as_evidence", {"label": "focus"}), ("zoom", {"amount": -1})]:
        registry.call(name, arguments)
    assert read_trace(path)[1]["payload"]["viewport"] == [640, 480]
    assert main(["replay", str(path), "--data-root", str(root)]) == 0, capsys.readouterr().out


@pytest.mark.parametrize("app, actions", [("radiology", "open_case"), ("slicer", "open_case"),
                                          ("pathology", "load_image"), ("wsi", "load_image")])
def test_session_config_names_the_application_in_the_catalog_vocabulary(app, actions, tmp_path):
    """New traces say radiology/pathology (catalog.APPLICATIONS); traces written before say slicer/wsi and replay
    the same; any other name is refused before a session is built."""
    from MedOpenClawLib.pathology.actions import build_pathology_registry
    from MedOpenClawLib.replay import build_from_config

    configs = [build_slicer_registry([tmp_path]).config, build_pathology_registry([tmp_path]).config]
    assert [config["app"] for config in configs] == ["radiology", "pathology"]
    rebuilt = build_from_config({**configs[app in ("pathology", "wsi")], "app": app}, [tmp_path])
    assert rebuilt.get(actions) is not None
    with pytest.raises(ValueError, match="unknown application 'qupath'"):
        build_from_config({"app": "qupath"}, [tmp_path])


def test_replay_charges_the_round_budget_as_the_episode_did(tmp_path, capsys):
    root = tmp_path / "data"
    root.mkdir()
    write_nifti(root / "T1c.nii.gz", phantom(1), oblique_lps_affine())
    path = tmp_path / "budget.jsonl"
    registry = build_slicer_registry([root], trace=AuditTrace(path), max_rounds=2)
    assert registry.call("open_case", {"dicom_dir": str(root), "size": 64}, round_id=1).ok
    assert registry.call("observe", {"size": 64}, round_id=1).ok  # same round: not charged again
    assert registry.call("get_slice_offset_range", {"view": "axial"}, round_id=2).ok
    assert registry.call("ping", {}, round_id=3).error["code"] == "budget_exhausted"
    assert [record.get("round") for record in read_trace(path) if record["kind"] == "action"] == [1, 1, 2, 3]
    assert main(["replay", str(path), "--data-root", str(root)]) == 0, capsys.readouterr().out


def test_a_new_trace_on_an_old_path_is_refused_and_the_old_one_kept(recorded):
    path, _ = recorded
    old_images = path.with_name(path.stem + "_images")
    before, images = path.read_bytes(), sorted(old_images.iterdir())
    with pytest.raises(FileExistsError, match="never overwritten"):
        AuditTrace(path, save_images=True)
    assert path.read_bytes() == before and sorted(old_images.iterdir()) == images and verify_trace(path).ok

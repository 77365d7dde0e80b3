"""Pathology actions through the registry: happy paths, bad input, rollback, evidence, audit and summaries."""

from __future__ import annotations

import json

import pytest
from pathology_slides import REGIONS, SLIDE_SIZE

from MedOpenClawLib import apps
from MedOpenClawLib.core.audit import AuditTrace, action_states, verify_trace
from MedOpenClawLib.pathology.actions import PathologyContext, build_pathology_registry
from MedOpenClawLib.pathology.summaries import direct_state_summary, gui_state_summary
from MedOpenClawLib.pathology.viewer import HeadlessWsiViewer

CASE = "case_regions"

TABLE_10 = {"zoom", "pan", "focus_qupath", "capture_viewer", "viewer_point_to_wsi_coordinate"}  # MedFlow-Bench


@pytest.fixture
def registry(slide_root, tmp_path):
    trace = AuditTrace(tmp_path / "trace.jsonl", save_images=True)
    reg = build_pathology_registry(
        [slide_root], trace=trace, max_rounds=20, viewer=HeadlessWsiViewer((512, 384)), artifact_dir=tmp_path / "art"
    )
    assert reg.call("load_case", {"case_path": CASE}, actor="system").ok
    return reg


def _state(registry):
    return registry.context.viewer.view_state()


def test_registry_offers_every_named_operation(registry):
    names = [action.name for action in registry.actions()]
    assert names == [
        "load_case", "load_image", "set_image_type", "zoom", "pan", "focus_qupath", "capture_viewer",
        "viewer_point_to_wsi_coordinate", "record_view_as_evidence", "sleep", "close",
    ]
    assert {action.name for action in registry.actions() if action.paper} == TABLE_10
    tools = {tool["function"]["name"]: tool["function"]["parameters"] for tool in apps.tools(registry, "openai")}
    assert tools["viewer_point_to_wsi_coordinate"]["required"] == ["x", "y"]
    assert set(tools["zoom"]["properties"]) == {"direction", "amount", "unit", "x", "y"}
    assert isinstance(registry.context, PathologyContext)


def test_load_case_forms(registry, slide_root, slide_path, tmp_path):
    assert registry.call("load_case", {"case_path": slide_path}).ok  # a slide file
    project_dir = slide_root / "project_case"
    project_dir.mkdir(exist_ok=True)
    (project_dir / "project.qpproj").write_text(json.dumps({"images": [
        {"imageName": "regions", "serverBuilder": {"uri": "file:" + slide_path}},
        {"imageName": "plain", "serverBuilder": {"uri": (slide_root / "case_plain" / "plain.tif").as_uri()}},
    ]}))
    result = registry.call("load_case", {"case_path": "project_case", "image_name": "plain"})
    assert result.ok and result.data["state"]["image"]["name"] == "plain.tif"
    ambiguous = registry.call("load_case", {"case_path": "project_case"})
    assert not ambiguous.ok and ambiguous.error["code"] == "ambiguous_case"
    assert _state(registry).image_path.endswith("plain.tif"), "a failed load changes nothing"


def test_project_pointing_outside_the_roots_is_refused(registry, slide_root, tmp_path):
    outside = tmp_path / "outside.tif"
    outside.write_bytes(b"II*\x00")
    project_dir = slide_root / "escaping_project"
    project_dir.mkdir(exist_ok=True)
    (project_dir / "project.qpproj").write_text(json.dumps({"images": [{"serverBuilder": {"uri": outside.as_uri()}}]}))
    before = _state(registry)
    result = registry.call("load_case", {"case_path": "escaping_project"})
    assert result.error["code"] == "path_not_allowed" and _state(registry) == before


@pytest.mark.parametrize(
    "arguments, code",
    [
        ({"image_path": "/etc/passwd"}, "path_not_allowed"),
        ({"image_path": "missing.tif"}, "not_found"),
        ({"image_path": "not_a_slide.tif"}, "unreadable_image"),
        ({"image_path": ""}, "invalid_argument"),
        ({"path": "x.tif"}, "invalid_argument"),
    ],
)
def test_load_image_bad_paths(registry, arguments, code):
    before = _state(registry)
    result = registry.call("load_image", arguments)
    assert not result.ok and result.error["code"] == code, result.error
    assert result.error["message"]
    assert _state(registry) == before


def test_load_image_and_set_image_type(registry):
    assert registry.call("load_image", {"image_path": "case_plain/plain.tif"}).ok
    result = registry.call("set_image_type", {"image_type": "BRIGHTFIELD_H_E"})
    assert result.ok and result.data["state"]["image_type"] == "BRIGHTFIELD_H_E"
    bad = registry.call("set_image_type", {"image_type": "H&E please"})
    assert bad.error["code"] == "invalid_argument" and _state(registry).image_type == "BRIGHTFIELD_H_E"


def test_zoom_and_pan_actions(registry):
    start = _state(registry)
    result = registry.call("zoom", {"direction": "in", "amount": 4, "unit": "factor", "x": 100, "y": 200})
    assert result.ok
    view = result.data["state"]["view"]
    assert view["downsample"] == pytest.approx(start.downsample / 4)
    assert view["magnification"] == pytest.approx(40 / view["downsample"], rel=1e-4)
    result = registry.call("pan", {"direction": "right", "amount": 0.5})  # unit defaults to viewport
    assert result.ok and result.data["state"]["view"]["centre_x"] == pytest.approx(
        view["centre_x"] + 0.5 * 512 * view["downsample"], abs=1e-3
    )
    out = registry.call("zoom", {"direction": "out", "amount": 1000})
    assert out.ok and "zoom-out limit: the whole slide fits the viewer" in out.data["notes"]


@pytest.mark.parametrize(
    "name, arguments",
    [
        ("zoom", {"direction": "in"}),  # amount missing (schema)
        ("zoom", {"direction": "in", "amount": 2, "unit": "percent"}),  # schema enum
        ("zoom", {"amount": 2}),  # factor without direction (handler)
        ("zoom", {"direction": "in", "amount": 2, "x": 5}),  # x without y (handler)
        ("pan", {"direction": "left", "amount": 1, "x": 3, "y": 4}),
        ("pan", {}),
        ("pan", {"direction": "left", "amount": -1}),
        ("viewer_point_to_wsi_coordinate", {"x": 1000, "y": 5}),
        ("viewer_point_to_wsi_coordinate", {"x": 5}),
        ("capture_viewer", {"label": ""}),
        ("record_view_as_evidence", {}),
        ("sleep", {"seconds": 60}),
        ("focus_qupath", {"please": True}),
        ("close", {"now": 1}),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(registry, name, arguments):
    registry.call("zoom", {"direction": "in", "amount": 2})
    before = _state(registry)
    evidence = registry.context.evidence_json()
    result = registry.call(name, arguments)
    assert not result.ok and result.error["code"] == "invalid_argument", result.error
    assert _state(registry) == before and registry.context.evidence_json() == evidence


def test_viewer_point_to_wsi_coordinate_action(registry):
    (x0, y0, x1, y1), _ = REGIONS["blue"]
    state = _state(registry)
    nx, ny = state.wsi_to_normalised((x0 + x1) / 2, (y0 + y1) / 2)
    registry.call("zoom", {"direction": "in", "amount": 8, "x": round(nx), "y": round(ny)})
    state = _state(registry)
    nx, ny = state.wsi_to_normalised((x0 + x1) / 2, (y0 + y1) / 2)
    result = registry.call("viewer_point_to_wsi_coordinate", {"x": round(nx), "y": round(ny)})
    assert result.ok and result.data["inside_slide"] and result.data["overlay"] is None
    assert abs(result.data["x"] - (x0 + x1) / 2) <= state.downsample
    assert abs(result.data["y"] - (y0 + y1) / 2) <= state.downsample
    on_inset = registry.call("viewer_point_to_wsi_coordinate", {"x": 950, "y": 60})
    assert on_inset.ok and on_inset.data["overlay"] == "overview" and on_inset.data["warnings"]
    registry.call("pan", {"direction": "left", "amount": 10**6, "unit": "wsi_px"})
    off_slide = registry.call("viewer_point_to_wsi_coordinate", {"x": 100, "y": 500})
    assert off_slide.ok and not off_slide.data["inside_slide"] and off_slide.data["x"] < 0


def test_capture_and_record_evidence_export(registry, tmp_path):
    registry.call("zoom", {"direction": "in", "amount": 3})
    captured = registry.call("capture_viewer", {"label": "suspicious ../area"})
    assert captured.ok and captured.images and captured.images[0].width == 512
    record = captured.data["capture"]
    assert record["label"] == "suspicious ../area" and record["path"].endswith("capture_000_suspicious_area.png")
    assert captured.artifacts[0]["sha256"] == record["sha256"]
    recorded = registry.call("record_view_as_evidence", {"label": "roi"})
    view = recorded.data["recorded_view"]
    x0, y0, x1, y1 = view["field"]
    assert 0 <= x0 < x1 <= SLIDE_SIZE[0] and 0 <= y0 < y1 <= SLIDE_SIZE[1]
    assert view["downsample"] == pytest.approx(_state(registry).downsample)
    exported = json.loads(registry.context.export_evidence(tmp_path / "evidence.json").read_text())
    assert [c["label"] for c in exported["captures"]] == ["suspicious ../area"]
    assert [v["label"] for v in exported["recorded_views"]] == ["roi"]
    assert verify_trace(registry.trace.path).ok


def test_focus_sleep_close(registry):
    assert registry.call("focus_qupath").data["state"]["view"] is not None
    assert registry.call("sleep", {"seconds": 0.01}).data["slept_seconds"] == 0.01
    assert registry.call("close").ok and not _state(registry).has_image
    for name, arguments in (("zoom", {"direction": "in", "amount": 2}), ("capture_viewer", {"label": "x"}),
                            ("viewer_point_to_wsi_coordinate", {"x": 1, "y": 1}),
                            ("record_view_as_evidence", {"label": "x"})):
        result = registry.call(name, arguments)
        assert result.error["code"] == "no_image", name


def test_rollback_restores_view_and_evidence(registry, slide_root):
    context = registry.context
    token = context.checkpoint()
    before = _state(registry)
    registry.call("capture_viewer", {"label": "a"})
    registry.call("record_view_as_evidence", {"label": "b"})
    registry.call("load_image", {"image_path": "case_plain/plain.tif"})
    registry.call("zoom", {"direction": "in", "amount": 2})
    context.rollback(token)
    assert _state(registry) == before and context.evidence_json() == {"captures": [], "recorded_views": []}
    assert context.viewer.slide_info().width == SLIDE_SIZE[0]


def test_budget_and_audit(slide_root, tmp_path):
    registry = build_pathology_registry([slide_root], max_rounds=2, trace=AuditTrace(tmp_path / "t.jsonl"))
    registry.call("load_case", {"case_path": CASE}, actor="system")
    assert registry.call("zoom", {"direction": "in", "amount": 2}, round_id=1).ok
    assert registry.call("pan", {"direction": "up", "amount": 0.1}, round_id=2).ok
    refused = registry.call("pan", {"direction": "up", "amount": 0.1}, round_id=3)
    assert refused.error["code"] == "budget_exhausted"
    actions = action_states(registry.trace.records)
    assert [record["status"] for record, _ in actions] == ["ok", "ok", "ok", "error"]
    assert actions[1][1]["viewer"]["view"]["downsample"] < actions[0][1]["viewer"]["view"]["downsample"]
    assert verify_trace(tmp_path / "t.jsonl").ok


def test_observation_and_state_summaries(registry):
    registry.call("set_image_type", {"image_type": "BRIGHTFIELD_H_E"}, round_id=1)
    observation = registry.context.observation()
    assert observation.image.width == 512 and observation.image.height == 384
    direct = observation.direct_state_summary
    assert "Image: regions.tif (6000 x 4000 px at full resolution; 3 pyramid levels; 0.25 µm/px" in direct
    assert "Image type: BRIGHTFIELD_H_E" in direct and "Tool rounds used: 1 of 20" in direct
    assert "Viewer centre (full-resolution px): x=3 000.0, y=2 000.0" in direct
    gui = observation.gui_state_summary
    assert "fully zoomed out" in gui and "panning is possible in every direction" in gui
    assert "Overlays (not tissue; never pick points there): magnification text" in gui
    registry.call("zoom", {"direction": "in", "amount": 4}, round_id=2)
    registry.call("pan", {"direction": "left", "amount": 10**6, "unit": "wsi_px"}, round_id=3)
    gui = gui_state_summary(registry.context.state())
    assert "can zoom in by up to" in gui and "on the left slide edge" in gui and "50% of the screenshot" in gui
    registry.call("close", round_id=4)
    empty = registry.context.state()
    assert direct_state_summary(empty).startswith("No image is open") and "empty" in gui_state_summary(empty)
    assert registry.context.observation().image is None


def test_a_second_session_on_the_same_artifact_folder_never_overwrites_captures(registry, slide_root, tmp_path):
    first = registry.call("capture_viewer", {"label": "roi"}).data["capture"]
    other = build_pathology_registry([slide_root], viewer=HeadlessWsiViewer((256, 256)), artifact_dir=tmp_path / "art")
    assert other.call("load_case", {"case_path": CASE}, actor="system").ok
    second = other.call("capture_viewer", {"label": "roi"}).data["capture"]
    assert second["path"] != first["path"]
    assert verify_trace(registry.trace.path).ok  # the first session's checksums still hold

"""Registry contract: schemas and tool exports, validation errors, track gating, budget, rollback, audit."""

from __future__ import annotations

from runtime_data import oblique_lps_affine, phantom, write_nifti

from MedOpenClawLib import apps
from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.core.audit import AuditTrace, action_states
from MedOpenClawLib.core.policy import SessionPolicy
from MedOpenClawLib.core.registry import ActionRegistry
from MedOpenClawLib.core.result import ActionError, Result
from MedOpenClawLib.core.toolset import Toolset

TABLE_9 = ["ping", "open_case", "select_volume", "observe", "scroll", "zoom", "fit", "set_slice_offset",
           "get_slice_offset_range", "recover_standard_views", "image_coords_to_ras", "get_viewer_state", "wl",
           "window_preset", "jump", "set_layout", "fusion"]
EVIDENCE_TOOLS = ["bookmark_view", "record_key_slices", "record_point", "draw_roi", "measure_line", "list_evidence",
                  "export_evidence"]



def test_every_paper_tool_is_registered_with_exportable_schemas():
    registry = build_slicer_registry([])
    names = [action.name for action in registry.actions()]
    assert {action.name for action in registry.actions() if action.paper} == set(TABLE_9)  # in any order
    assert set(EVIDENCE_TOOLS) <= set(names)
    for tool in apps.tools(registry, "openai"):
        assert tool["type"] == "function" and tool["function"]["parameters"]["type"] == "object"
        assert tool["function"]["parameters"]["additionalProperties"] is False
    for tool in apps.tools(registry, "anthropic"):
        assert set(tool) == {"name", "description", "input_schema"}
    image_coords = registry.get("image_coords_to_ras").parameters["properties"]
    assert {"view", "point_1000", "bbox_1000", "volume_id", "volume_name"} <= set(image_coords)


def test_unknown_action_and_schema_violations_are_clear_errors(data_root):
    registry = build_slicer_registry([data_root])
    assert registry.call("rm_rf", {}).error["code"] == "unknown_action"
    error = registry.call("set_slice_offset", {"view": "axial", "offset": "ten"}).error
    assert error["code"] == "invalid_argument" and "offset" in error["message"]
    assert "view" in registry.call("set_slice_offset", {"offset": 1}).error["message"]
    assert registry.call("jump", {"ras": [1, 2], "view": "axial"}).error["code"] == "invalid_argument"
    assert registry.call("observe", {"viewz": "axial"}).error["code"] == "invalid_argument"
    assert registry.call("observe", ["axial"]).error["code"] == "invalid_argument"
    assert registry.call("observe", {}).error["code"] == "no_volume"
    assert registry.call("ping", {}, actor="robot").error["code"] == "invalid_actor"


def b_only_toolset() -> Toolset:
    toolset = Toolset("b_only")

    @toolset.action("segment_everything", "operator", "Track-B only test operator.", tracks=("B",))
    def segment_everything(ctx) -> Result:
        return Result(ok=True)

    return toolset


class CountingContext:
    """A minimal ActionContext whose state is one counter, to test rollback without a scene."""

    def __init__(self, track: str = "A", max_rounds: int | None = None):
        self.policy = SessionPolicy(track=track, max_rounds=max_rounds)
        self.counter = 0

    def state(self) -> dict:
        return {"counter": self.counter}

    def checkpoint(self):
        return self.counter

    def rollback(self, token) -> None:
        self.counter = token


def counting_toolset() -> Toolset:
    toolset = Toolset("counting")

    @toolset.action("increment", "viewer", "Add one; fails after changing state when asked to.",
                    {"fail": {"type": "boolean"}, "crash": {"type": "boolean"}})
    def increment(ctx, fail: bool = False, crash: bool = False) -> Result:
        ctx.counter += 1
        if fail:
            raise ActionError("refused", "asked to fail")
        if crash:
            raise ZeroDivisionError("handler bug")
        return Result(ok=True, data={"counter": ctx.counter})

    return toolset


def test_track_gating_offers_operators_only_on_track_b():
    on_a = ActionRegistry(CountingContext("A"), [b_only_toolset()])
    assert on_a.actions() == [] and on_a.call("segment_everything").error["code"] == "not_on_track"
    on_b = ActionRegistry(CountingContext("B"), [b_only_toolset()])
    assert [action.name for action in on_b.actions()] == ["segment_everything"]
    assert on_b.call("segment_everything").ok


def test_failed_or_crashing_handler_is_rolled_back_and_audited():
    trace = AuditTrace(None)
    registry = ActionRegistry(CountingContext(), [counting_toolset()], trace)
    assert registry.call("increment").ok
    failed = registry.call("increment", {"fail": True})
    assert failed.error == {"code": "refused", "message": "asked to fail"}
    crashed = registry.call("increment", {"crash": True})
    assert crashed.error["code"] == "internal_error" and "ZeroDivisionError" in crashed.error["message"]
    assert registry.context.counter == 1
    statuses = [(record["action"], record["status"], state) for record, state in action_states(trace.records)]
    assert statuses == [("increment", "ok", {"counter": 1}), ("increment", "error", {"counter": 1}),
                        ("increment", "error", {"counter": 1})]


def test_round_budget_counts_agent_rounds_only():
    registry = ActionRegistry(CountingContext(max_rounds=2), [counting_toolset()])
    assert registry.call("increment", round_id=1).ok
    assert registry.call("increment", round_id=1).ok  # same round
    assert registry.call("increment", round_id=2).ok
    exhausted = registry.call("increment", round_id=3)
    assert exhausted.error["code"] == "budget_exhausted"
    assert registry.call("increment", actor="human").ok  # a clinician is never budgeted
    assert registry.context.counter == 4


def test_failed_viewer_action_leaves_viewer_state_unchanged(data_root):
    registry = build_slicer_registry([data_root])
    assert registry.call("open_case", {"dicom_dir": str(data_root)}).ok
    before = registry.call("get_viewer_state").data
    for name, arguments in [
        ("jump", {"ras": [900, 0, 0]}),
        ("set_slice_offset", {"view": "coronal", "offset": -1e4}),
        ("record_point", {"ras": [900, 0, 0]}),
        ("draw_roi", {"view": "axial", "shape": "circle", "center_1000": [500, 500]}),
        ("zoom", {"view": "axial", "factor": 2, "center_1000": [5000, 1]}),
        ("select_volume", {"volume_name": "PET"}),
        ("fusion", {"background_volume_ref": "CT", "foreground_volume_ref": "CT"}),
    ]:
        assert not registry.call(name, arguments).ok, name
        assert registry.call("get_viewer_state").data == before, name
    assert registry.context.evidence.items == []


def test_track_b_session_reports_the_artifact_graph_and_warns_on_unaligned_fusion(tmp_path):
    root = tmp_path / "data"
    (root / "baseline").mkdir(parents=True)
    (root / "followup").mkdir()
    write_nifti(root / "baseline" / "T1c.nii.gz", phantom(0), oblique_lps_affine())
    shifted = oblique_lps_affine()
    shifted[:3, 3] += [4.0, -3.0, 2.0]
    write_nifti(root / "followup" / "T1c.nii.gz", phantom(1), shifted)
    on_a = build_slicer_registry([root])
    assert "artifacts" not in on_a.call("get_viewer_state").data
    registry = build_slicer_registry([root], track="B")
    assert registry.call("open_case", {"dicom_dir": str(root)}).ok
    assert "artifacts" in registry.call("get_viewer_state").data
    fused = registry.call("fusion", {"background_volume_ref": "baseline_T1c", "foreground_volume_ref": "followup_T1c"})
    assert fused.ok and fused.data["warnings"], fused.data


def every_registry(tmp_path):
    from MedOpenClawLib.pathology.actions import build_pathology_registry

    return {"slicer-B": build_slicer_registry([tmp_path], track="B"), "wsi": build_pathology_registry([tmp_path])}


def test_every_action_of_every_registry_rejects_unknown_arguments_without_side_effects(tmp_path):
    for name, registry in every_registry(tmp_path).items():
        for action in registry.actions():
            before = registry.context.state()
            result = registry.call(action.name, {"not_an_argument": 1})
            assert result.error["code"] == "invalid_argument", (name, action.name, result.error)
            assert "not_an_argument" in result.error["message"]
            assert registry.context.state() == before, (name, action.name)
        assert all(record["status"] == "error" for record in registry.trace.actions())

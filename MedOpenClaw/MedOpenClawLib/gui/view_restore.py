""""Restore this view": bring the viewer back to the state snapshot of any audit record.

The restore is a short plan of ordinary registry actions run as ``actor="human"`` (layout, volume, fusion,
window/level, zoom, slice offsets), planned from the difference between the current state and the snapshot.
Going through the registry keeps the audit trail complete and a trace replayable: a restore appears as the
clinician's own actions, never as an unrecorded change to the scene.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.audit import state_at
from ..core.registry import ActionRegistry

VIEWS = ("axial", "sagittal", "coronal")
OFFSET_TOLERANCE_MM = 0.01
FOV_TOLERANCE = 1e-3
WL_TOLERANCE = 1e-3
MIN_ZOOM, MAX_ZOOM = 0.05, 20.0


@dataclass(frozen=True)
class Step:
    action: str
    arguments: dict


@dataclass
class RestoreOutcome:
    seq: int
    steps: list[Step]
    failed: list[tuple[Step, dict]] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.mismatches

    def summary(self) -> str:
        if self.ok:
            return f"view of record #{self.seq} restored ({len(self.steps)} actions)"
        problems = [f"{step.action}: {error.get('message')}" for step, error in self.failed] + self.mismatches
        return f"view of record #{self.seq} restored only partly: " + "; ".join(problems)


def _volume(state: dict, name: str | None) -> dict | None:
    return next((volume for volume in state.get("volumes", []) if volume.get("name") == name), None)


def plan_restore(current: dict, target: dict) -> list[Step]:
    """The actions that turn viewer state ``current`` into ``target`` (both ``ctx.state()`` snapshots)."""
    steps: list[Step] = []
    if target.get("layout") and target["layout"] != current.get("layout"):
        steps.append(Step("set_layout", {"layout": target["layout"]}))
    active = target.get("active_volume")
    if active and active != current.get("active_volume"):
        steps.append(Step("select_volume", {"volume_name": active}))
        return steps  # select_volume resets every view: plan the rest from the state it leaves
    target_views = target.get("views", {})
    current_views = current.get("views", {})
    layers = target_views.get("axial", {})
    now = current_views.get("axial", {})
    if layers.get("background") and (
        layers.get("foreground") != now.get("foreground")
        or abs(layers.get("foreground_opacity", 0) - now.get("foreground_opacity", 0)) > WL_TOLERANCE
    ):
        arguments = {"background_volume_ref": layers["background"], "foreground_volume_ref": layers.get("foreground")}
        if layers.get("foreground"):
            arguments["foreground_opacity"] = layers.get("foreground_opacity", 0.5)
        steps.append(Step("fusion", arguments))
    wanted, present = _volume(target, active), _volume(current, active)
    if wanted and active and _display_differs(wanted, present):
        if wanted.get("auto"):
            steps.append(Step("wl", {"volume_name": active, "auto": True}))
        else:
            steps.append(Step("wl", {"volume_name": active, "window": wanted["window"], "level": wanted["level"]}))
    for view in VIEWS:
        goal, have = target_views.get(view), current_views.get(view, {})
        if not goal:
            continue
        fov_goal, fov_have = goal.get("field_of_view_mm"), have.get("field_of_view_mm")
        if fov_goal and fov_have and abs(fov_have[0] / fov_goal[0] - 1.0) > FOV_TOLERANCE:
            factor = min(max(fov_have[0] / fov_goal[0], MIN_ZOOM), MAX_ZOOM)
            steps.append(Step("zoom", {"view": view, "factor": round(factor, 6)}))
        if "offset_mm" in goal and abs(goal["offset_mm"] - have.get("offset_mm", float("inf"))) > OFFSET_TOLERANCE_MM:
            steps.append(Step("set_slice_offset", {"view": view, "offset": goal["offset_mm"]}))
    return steps


def _display_differs(wanted: dict, present: dict | None) -> bool:
    if present is None:
        return True
    if wanted.get("auto") != present.get("auto"):
        return True
    return not wanted.get("auto") and any(
        abs(wanted.get(key, 0) - present.get(key, 0)) > WL_TOLERANCE for key in ("window", "level")
    )


def compare_views(actual: dict, target: dict) -> list[str]:
    """What still differs after a restore (what the user is told instead of a silent partial restore)."""
    mismatches = []
    if target.get("active_volume") != actual.get("active_volume"):
        mismatches.append(f"active volume is {actual.get('active_volume')}, not {target.get('active_volume')}")
    for view in VIEWS:
        goal, have = target.get("views", {}).get(view), actual.get("views", {}).get(view, {})
        if not goal:
            continue
        if abs(goal.get("offset_mm", 0) - have.get("offset_mm", 0)) > OFFSET_TOLERANCE_MM:
            mismatches.append(f"{view} offset is {have.get('offset_mm')} mm, not {goal.get('offset_mm')} mm")
        for key in ("background", "foreground"):
            if goal.get(key) != have.get(key):
                mismatches.append(f"{view} {key} is {have.get(key)}, not {goal.get(key)}")
    return mismatches


def restore_view(registry: ActionRegistry, record: dict, max_passes: int = 3) -> RestoreOutcome:
    """Plan, run, and re-plan from the resulting state (a volume switch resets the views); stops at the
    first failed action, which the registry has already rolled back."""
    target = record.get("state") or state_at(registry.trace.records, record.get("seq")) or {}
    if record.get("kind") != "action" or not target.get("views"):
        raise ValueError(f"record #{record.get('seq')} has no viewer state to restore")
    outcome = RestoreOutcome(record["seq"], [])
    for _ in range(max_passes):
        steps = plan_restore(registry.context.state(), target)
        if not steps or outcome.failed:
            break
        for step in steps:
            outcome.steps.append(step)
            result = registry.call(step.action, step.arguments, actor="human",
                                   audit_extra={"restore_view_of": record["seq"]})
            if not result.ok:
                outcome.failed.append((step, result.error))
                break
    outcome.mismatches = compare_views(registry.context.state(), target)
    return outcome

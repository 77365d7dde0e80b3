"""The QuPath registry's named operations (MedFlow-Bench App. B, Table 10) as audited actions over a PathologyViewer.

``build_pathology_registry`` gives the runner an :class:`~MedOpenClawLib.core.registry.ActionRegistry` whose context
(:class:`PathologyContext`) holds the viewer, the session policy and the episode's evidence (captured and
recorded views), and produces the per-round observation (screenshot + App. H.2 state summaries).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..core.applications import PATHOLOGY as PATHOLOGY_APP
from ..core.arguments import COORDINATE_1000, WSI_LABEL
from ..core.audit import AuditTrace, fresh_path, sha256_bytes
from ..core.policy import DataRootPolicy, SessionPolicy
from ..core.registry import ActionRegistry
from ..core.result import ActionError, RenderedImage, Result, warning
from ..core.sinks import write_json
from ..core.toolset import Toolset
from .cases import resolve_case_image, resolve_slide
from .geometry import MIN_DOWNSAMPLE, PAN_DIRECTIONS, PAN_UNITS, ZOOM_DIRECTIONS, ZOOM_UNITS, ViewState
from .render import normalised_rect
from .summaries import direct_state_summary, gui_state_summary
from .viewer import IMAGE_TYPES, MAX_SLEEP_SECONDS, HeadlessWsiViewer, PathologyViewer, describe_view, view_record

PATHOLOGY = Toolset("pathology")
# paper=True marks Table 10, the direct tools MedFlow-Bench's pathology agents see; the rest serve recovery and setup


@dataclass
class PathologyObservation:
    """What the runner attaches to each round: the screenshot and the two App. H.2 state summaries."""

    image: RenderedImage | None
    direct_state_summary: str
    gui_state_summary: str


class PathologyContext:
    """Registry context: the viewer, the policy, and the evidence list (checkpointed with the view)."""

    def __init__(self, viewer: PathologyViewer, policy: SessionPolicy, artifact_dir: str | os.PathLike | None = None):
        self.viewer = viewer
        self.policy = policy
        self.artifact_dir = Path(artifact_dir) if artifact_dir else None
        self.captures: list[dict] = []
        self.recorded_views: list[dict] = []

    # -- ActionContext -----------------------------------------------------------------------------------------
    def state(self) -> dict:
        state = self.viewer.view_state()
        return {
            "viewer": describe_view(state, self.viewer.slide_info()),
            "overlays": {name: normalised_rect(rect, state) for name, rect in self.viewer.overlays().items()},
            "evidence": {"captures": len(self.captures), "recorded_views": len(self.recorded_views)},
            "policy": self.policy.to_json(),
        }

    def checkpoint(self) -> tuple[ViewState, int, int]:
        return self.viewer.view_state(), len(self.captures), len(self.recorded_views)

    def rollback(self, token: tuple[ViewState, int, int]) -> None:
        state, captures, recorded = token
        if self.viewer.view_state() != state:
            self.viewer.restore(state)
        del self.captures[captures:]
        del self.recorded_views[recorded:]

    # -- runner helpers ----------------------------------------------------------------------------------------
    def observation(self) -> PathologyObservation:
        """The current screenshot and state summaries for the next model turn (not an agent action)."""
        image = self.viewer.capture("observation") if self.viewer.view_state().has_image else None
        state = self.state()
        return PathologyObservation(image, direct_state_summary(state), gui_state_summary(state))

    def evidence_json(self) -> dict:
        return {"captures": list(self.captures), "recorded_views": list(self.recorded_views)}

    def export_evidence(self, path: str | os.PathLike) -> Path:
        return write_json(path, self.evidence_json(), indent=2)

    # -- helpers for handlers ----------------------------------------------------------------------------------
    def view_data(self, **extra) -> dict:
        data = {"state": describe_view(self.viewer.view_state(), self.viewer.slide_info())}
        data.update(extra)
        return data


def _limit_notes(state: ViewState) -> list[str]:
    """Tell the agent when its request hit a limit, so it does not claim a zoom or pan it did not get."""
    notes = []
    if state.downsample >= state.max_downsample - 1e-9:
        notes.append("zoom-out limit: the whole slide fits the viewer")
    if state.downsample <= MIN_DOWNSAMPLE + 1e-9:
        notes.append("zoom-in limit reached")
    if state.centre_x in (0.0, float(state.width)) or state.centre_y in (0.0, float(state.height)):
        notes.append("the view centre is clamped to the slide edge")
    return notes


def _overlay_at(context: PathologyContext, x: float, y: float) -> str | None:
    state = context.viewer.view_state()
    sx, sy = state.normalised_to_screen(x, y)
    for name, (x0, y0, x1, y1) in context.viewer.overlays().items():
        if x0 <= sx < x1 and y0 <= sy < y1:
            return name
    return None


def _safe_label(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", label)[:40].strip("_") or "capture"


@PATHOLOGY.action(
    "load_case",
    "session",
    "Open a case: a slide file, a case folder holding one slide, or a QuPath project (.qpproj or a folder "
    "with project.qpproj). The case is usually loaded already; use this only to recover or reset.",
    properties={
        "case_path": {"type": "string", "minLength": 1, "description": "case path under the data root"},
        "image_name": {"type": "string", "minLength": 1, "description": "image within a project or folder"},
    },
    required=["case_path"],
)
def load_case(context: PathologyContext, case_path: str, image_name: str | None = None) -> Result:
    image = resolve_case_image(case_path, image_name, context.policy.data_roots)
    context.viewer.load_image(str(image))
    return Result(True, context.view_data(case=case_path))


@PATHOLOGY.action(
    "load_image",
    "session",
    "Open one whole-slide image file in the viewer (whole slide in view, image type UNSET).",
    properties={"image_path": {"type": "string", "minLength": 1, "description": "slide path under the data root"}},
    required=["image_path"],
)
def load_image(context: PathologyContext, image_path: str) -> Result:
    context.viewer.load_image(str(resolve_slide(image_path, context.policy.data_roots)))
    return Result(True, context.view_data())


@PATHOLOGY.action(
    "set_image_type",
    "viewer",
    "Set the QuPath image type of the open image (e.g. BRIGHTFIELD_H_E for H&E slides).",
    properties={"image_type": {"type": "string", "enum": list(IMAGE_TYPES)}},
    required=["image_type"],
)
def set_image_type(context: PathologyContext, image_type: str) -> Result:
    context.viewer.set_image_type(image_type)
    return Result(True, context.view_data())


@PATHOLOGY.action(
    "zoom",
    "viewer",
    "Change the viewer zoom by absolute magnification (amount = target objective magnification, e.g. 10), "
    "relative factor (amount > 1, direction in|out) or internal steps (amount whole steps of sqrt 2, direction "
    "in|out); optionally recentre first on the screenshot point x, y (0..999). Returns the updated viewer state.",
    properties={
        "direction": {"type": "string", "enum": list(ZOOM_DIRECTIONS)},
        "amount": {"type": "number", "exclusiveMinimum": 0},
        "unit": {"type": "string", "enum": list(ZOOM_UNITS), "default": "factor"},
        "x": COORDINATE_1000,
        "y": COORDINATE_1000,
    },
    required=["amount"],
    paper=True,
)
def zoom(context: PathologyContext, amount: float, unit: str, direction: str | None = None, x: float | None = None,
         y: float | None = None) -> Result:
    state = context.viewer.zoom(direction, amount, unit, x, y)
    return Result(True, context.view_data(notes=_limit_notes(state)))


@PATHOLOGY.action(
    "pan",
    "viewer",
    "Pan the viewer: direction (left|right|up|down moves the field of view that way) by amount in unit "
    "viewport (fraction of the screen), screen_px or wsi_px (full-resolution px); or recentre on the screenshot "
    "point x, y (0..999) instead. Returns the updated viewer state.",
    properties={
        "direction": {"type": "string", "enum": list(PAN_DIRECTIONS)},
        "amount": {"type": "number", "exclusiveMinimum": 0},
        "unit": {"type": "string", "enum": list(PAN_UNITS), "default": "viewport"},
        "x": COORDINATE_1000,
        "y": COORDINATE_1000,
    },
    paper=True,
)
def pan(context: PathologyContext, unit: str, direction: str | None = None, amount: float | None = None,
        x: float | None = None, y: float | None = None) -> Result:
    state = context.viewer.pan(direction, amount, unit, x, y)
    return Result(True, context.view_data(notes=_limit_notes(state)))


@PATHOLOGY.action("focus_qupath", "session", "Bring the viewer to the foreground and return its current state.",
                  paper=True)
def focus_qupath(context: PathologyContext) -> Result:
    context.viewer.focus_qupath()
    return Result(True, context.view_data())


@PATHOLOGY.action(
    "capture_viewer",
    "evidence",
    "Capture the current viewer screenshot and store it as a labelled evidence artifact.",
    properties={"label": WSI_LABEL},
    required=["label"],
    paper=True,
)
def capture_viewer(context: PathologyContext, label: str) -> Result:
    context.policy.check_evidence_room(len(context.captures) + len(context.recorded_views))
    state = context.viewer.view_state()
    if not state.has_image:
        raise ActionError("no_image", "no image is open; call load_case or load_image first")
    image = context.viewer.capture(label)
    png = image.png_bytes()
    record = {
        "index": len(context.captures),
        "sha256": sha256_bytes(png),
        "width": image.width,
        "height": image.height,
        **view_record(state, context.viewer.slide_info(), label),
    }
    artifacts = []
    if context.artifact_dir is not None:
        context.artifact_dir.mkdir(parents=True, exist_ok=True)
        target = fresh_path(context.artifact_dir, f"capture_{record['index']:03d}_{_safe_label(label)}", ".png")
        target.write_bytes(png)
        record["path"] = str(target)
        artifacts.append({"path": str(target), "sha256": record["sha256"], "kind": "capture"})
    context.captures.append(record)
    return Result(True, {"capture": record}, images=[image], artifacts=artifacts)


@PATHOLOGY.action(
    "viewer_point_to_wsi_coordinate",
    "viewer",
    "Convert a point on the current screenshot (x, y in 0..999 from its top-left) to full-resolution WSI "
    "pixel coordinates; use the returned x, y as localizations in the final answer.",
    properties={"x": COORDINATE_1000, "y": COORDINATE_1000},
    required=["x", "y"],
    paper=True,
)
def viewer_point_to_wsi_coordinate(context: PathologyContext, x: float, y: float) -> Result:
    wsi_x, wsi_y = context.viewer.viewer_point_to_wsi_coordinate(x, y)
    state = context.viewer.view_state()
    inside = state.contains(wsi_x, wsi_y)
    overlay = _overlay_at(context, x, y)
    warnings = []
    if not inside:
        warnings.append(warning("outside_slide", "the point lies outside the slide (blank background): it cannot "
                                "be tissue"))
    if overlay:
        warnings.append(warning("on_overlay", f"the point lies on the {overlay.replace('_', ' ')} overlay, not on "
                                "the main tissue image"))
    return Result(True, {
        "x": round(wsi_x, 2),
        "y": round(wsi_y, 2),
        "inside_slide": inside,
        "overlay": overlay,
        "downsample": round(state.downsample, 6),
        "warnings": warnings,
    })


@PATHOLOGY.action(
    "record_view_as_evidence",
    "evidence",
    "Record the current view (image, centre, downsample, full-resolution field) as labelled evidence.",
    properties={"label": WSI_LABEL},
    required=["label"],
)
def record_view_as_evidence(context: PathologyContext, label: str) -> Result:
    context.policy.check_evidence_room(len(context.captures) + len(context.recorded_views))
    record = {"index": len(context.recorded_views), **context.viewer.record_view(label)}
    context.recorded_views.append(record)
    return Result(True, {"recorded_view": record})


@PATHOLOGY.action(
    "sleep",
    "session",
    f"Wait up to {MAX_SLEEP_SECONDS:g} seconds (e.g. for the viewer to finish loading tiles).",
    properties={"seconds": {"type": "number", "minimum": 0, "maximum": MAX_SLEEP_SECONDS}},
    required=["seconds"],
)
def sleep(context: PathologyContext, seconds: float) -> Result:
    context.viewer.sleep(seconds)
    return Result(True, {"slept_seconds": seconds})


@PATHOLOGY.action("close", "session", "Close the open image; the viewer is empty until load_case or load_image.")
def close(context: PathologyContext) -> Result:
    context.viewer.close()
    return Result(True, context.view_data())


def build_pathology_registry(
    data_roots: list[str | os.PathLike],
    track: str = "A",
    trace: AuditTrace | None = None,
    max_rounds: int | None = None,
    viewer: PathologyViewer | None = None,
    artifact_dir: str | os.PathLike | None = None,
) -> ActionRegistry:
    """A registry of the pathology actions over ``viewer`` (a new headless engine by default)."""
    policy = SessionPolicy(track=track, max_rounds=max_rounds, data_roots=DataRootPolicy(list(data_roots)))
    context = PathologyContext(viewer if viewer is not None else HeadlessWsiViewer(), policy, artifact_dir)
    state = context.viewer.view_state()
    config = {"app": PATHOLOGY_APP, "track": track, "max_rounds": max_rounds,
              "data_roots": policy.data_roots.to_json(), "viewport": [state.viewport_width, state.viewport_height]}
    return ActionRegistry(context, [PATHOLOGY], trace, config)

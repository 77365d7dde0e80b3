"""Evidence-capture tools: bookmarks, key slices, RAS points, ROIs and line measurements, all validated
against the displayed volume so an agent cannot record evidence outside the image it claims to have read.
"""

from __future__ import annotations

import math
import re

import numpy as np
import slicer

from ..core.arguments import BOX_1000, IMAGE_ID, LABEL, POINT_1000, POINT_1000_ITEM, RAS, SIZE, VIEW, VOLUME
from ..core.audit import fresh_path, sha256_file
from ..core.result import ActionError, Result
from ..core.sinks import write_json
from ..core.toolset import Toolset
from ..viewer.actions import render, screen_points_to_ras, with_reference
from ..viewer.geometry import CANONICAL_AXIS, VIEWS, lies_inside

EVIDENCE = Toolset("evidence")


def require_volume(ctx, volume_id: str | None = None, volume_name: str | None = None):
    return ctx.engine.find_volume(volume_id, volume_name)


def check_inside(node, ras) -> None:
    if not lies_inside(node, ras):
        raise ActionError("outside_volume", f"RAS {list(ras)} lies outside {node.GetName()}")


def add_markups(ctx, class_name: str, kind: str, label: str, points=()) -> object:
    """A markups node for one evidence item. The user's label never becomes the node name: Slicer splices the
    name into the control-point label format (``%N-%d``) and hands the result to ``snprintf`` as the format
    (vtkMRMLMarkupsNode::GenerateControlPointLabel), so a label like ``%s%n`` would crash the process. The
    label is set where Slicer treats it as plain text: each control point's label and a node attribute."""
    node = ctx.engine.scene.AddNewNodeByClass(class_name, kind)
    node.SetAttribute("MedOpenClaw.label", label)
    for point in points:
        index = node.AddControlPoint(*[float(value) for value in point])
        if label:
            node.SetNthControlPointLabel(index, label)
    return node


def capture(ctx, kind: str, label: str, data: dict, node=None, view: str | None = None) -> Result:
    ctx.policy.check_evidence_room(len(ctx.evidence.items))
    view_state = {"active_volume": ctx.engine.state()["active_volume"]}
    if view:
        view_state["view"] = view
        view_state.update(ctx.engine.view_state(view))
        # the image the evidence was read on (or the last one shown of its view), so overlays can be drawn on it
        seen = ctx.engine.images.get(data["image_id"]) if "image_id" in data else ctx.engine.images.last(view)
        if seen is not None:
            view_state["image"] = {"image_id": seen.image_id, **seen.to_json()}
    item = ctx.evidence.add(kind, label, data, view_state, node.GetID() if node is not None else None)
    return Result(ok=True, data={"evidence_id": item.id, **data})


@EVIDENCE.action("bookmark_view", "evidence", "Bookmark the current view (volume, slice, zoom) as evidence.",
                 {"view": VIEW, "label": LABEL}, required=["view"])
def bookmark_view(ctx, view, label: str) -> Result:
    require_volume(ctx)
    return capture(ctx, "bookmark", label, {"view": view, "offset_mm": round(ctx.engine.offset(view), 3)},
                   view=view)


@EVIDENCE.action(
    "record_key_slices", "evidence",
    "Record key slices in canonical RAS mm (axial=S, sagittal=R, coronal=A); omitted views use their current "
    "offsets. Values must lie inside the active (or named) volume.",
    {"axial_mm": {"type": "number"}, "sagittal_mm": {"type": "number"}, "coronal_mm": {"type": "number"},
     **VOLUME, "label": LABEL},
)
def record_key_slices(ctx, label: str, axial_mm=None, sagittal_mm=None, coronal_mm=None, volume_id=None,
                      volume_name=None) -> Result:
    node = require_volume(ctx, volume_id, volume_name)
    given = {"axial": axial_mm, "sagittal": sagittal_mm, "coronal": coronal_mm}
    slices = {}
    for view in VIEWS:
        value = ctx.engine.offset(view) if given[view] is None else float(given[view])
        low, high, step = ctx.engine.offset_range(view, node)
        if not low - step / 2 <= value <= high + step / 2:
            raise ActionError("out_of_range", f"{view} key slice {value:.2f} mm is outside {node.GetName()} "
                                              f"({low:.2f} to {high:.2f} mm)")
        slices[f"{view}_mm"] = round(value, 3)
    return capture(ctx, "key_slices", label, {"volume_name": node.GetName(), **slices})


@EVIDENCE.action("record_point", "evidence", "Record a RAS point (mm) inside the active volume as evidence.",
                 {"ras": RAS, "label": LABEL, **VOLUME}, required=["ras"])
def record_point(ctx, ras, label: str, volume_id=None, volume_name=None) -> Result:
    node = require_volume(ctx, volume_id, volume_name)
    check_inside(node, ras)
    markups = add_markups(ctx, "vtkMRMLMarkupsFiducialNode", "point", label, [ras])
    return capture(ctx, "point", label, {"ras": [round(float(v), 3) for v in ras], "volume_name": node.GetName()},
                   markups)


@EVIDENCE.action(
    "draw_roi", "evidence",
    "Draw a region of interest on a displayed slice in 0..999 screen coordinates: a box (bbox_1000), a circle "
    "(center_1000 + radius_1000) or a polygon (points_1000). Stored as a Slicer markups node in RAS.",
    {"view": VIEW, "shape": {"type": "string", "enum": ["box", "circle", "polygon"]},
     "bbox_1000": BOX_1000,
     "center_1000": POINT_1000, "radius_1000": {"type": "number", "exclusiveMinimum": 0, "maximum": 999},
     "points_1000": {"type": "array", "items": POINT_1000_ITEM, "minItems": 3, "maxItems": 64},
     "image_id": IMAGE_ID, "label": LABEL, "size": SIZE},
    required=["view", "shape"],
)
def draw_roi(ctx, view, shape, label: str, size: int, bbox_1000=None, center_1000=None, radius_1000=None,
             points_1000=None, image_id=None) -> Result:
    node = require_volume(ctx)
    needed = {"box": ("bbox_1000",), "circle": ("center_1000", "radius_1000"), "polygon": ("points_1000",)}[shape]
    given = {"bbox_1000": bbox_1000, "center_1000": center_1000, "radius_1000": radius_1000,
             "points_1000": points_1000}
    missing = [name for name in needed if given[name] is None]
    extra = [name for name, value in given.items() if value is not None and name not in needed]
    if missing or extra:
        raise ActionError("invalid_argument", f"shape {shape!r} takes {', '.join(needed)}"
                          + (f"; missing {', '.join(missing)}" if missing else "")
                          + (f"; unexpected {', '.join(extra)}" if extra else ""))
    if shape == "box":
        x0, y0, x1, y1 = bbox_1000
        if x1 <= x0 or y1 <= y0:
            raise ActionError("invalid_argument", "bbox_1000 must be [x0, y0, x1, y1] with x1 > x0 and y1 > y0")
        corners, reference = screen_points_to_ras(ctx, view, [(x0, y0), (x1, y1)], image_id)
        axis = CANONICAL_AXIS[view]
        thickness = ctx.engine.offset_range(view)[2]
        center = (corners[0] + corners[1]) / 2.0
        extent = np.abs(corners[1] - corners[0])
        extent[axis] = thickness
        for point in (corners[0], corners[1]):
            check_inside(node, point)
        markups = add_markups(ctx, "vtkMRMLMarkupsROINode", "roi", label)
        markups.SetCenterWorld(*center)
        markups.SetSize(*extent)
        geometry = {"center_ras": center, "size_mm": extent}
    else:
        if shape == "circle":
            cx, cy = center_1000
            points_1000 = [(cx + radius_1000 * math.cos(t), cy + radius_1000 * math.sin(t))
                           for t in np.linspace(0, 2 * math.pi, 32, endpoint=False)]
        polygon, reference = screen_points_to_ras(ctx, view, points_1000, image_id)
        for point in polygon:
            check_inside(node, point)
        markups = add_markups(ctx, "vtkMRMLMarkupsClosedCurveNode", shape, label, polygon)
        area = polygon_area(np.array(polygon), CANONICAL_AXIS[view])
        geometry = {"points_ras": polygon, "area_mm2": area, "center_ras": np.mean(polygon, axis=0)}
    data = with_reference({"shape": shape, "view": view, "volume_name": node.GetName(),
                           **{key: np.round(np.asarray(value, dtype=float), 3).tolist()
                              for key, value in geometry.items()}}, reference)
    result = capture(ctx, "roi", label, data, markups, view)
    result.images = render(ctx, view, size).images
    return result


def polygon_area(points: np.ndarray, normal_axis: int) -> float:
    """Shoelace area of an in-plane polygon, in mm²."""
    u, v = [axis for axis in range(3) if axis != normal_axis]
    x, y = points[:, u], points[:, v]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2.0)


@EVIDENCE.action(
    "measure_line", "evidence",
    "Measure a straight line between two screen points on a displayed slice (or two RAS points); returns its "
    "length in mm and stores it as a line markup.",
    {"view": VIEW, "start_1000": POINT_1000, "end_1000": POINT_1000, "start_ras": RAS, "end_ras": RAS,
     "image_id": IMAGE_ID, "label": LABEL, "size": SIZE},
    oneOf=[{"required": ["view", "start_1000", "end_1000"]}, {"required": ["start_ras", "end_ras"]}],
)
def measure_line(ctx, label: str, size: int, view=None, start_1000=None, end_1000=None, start_ras=None, end_ras=None,
                 image_id=None) -> Result:
    node = require_volume(ctx)
    if start_1000 is not None and start_ras is not None:
        raise ActionError("invalid_argument", "give screen points or RAS points, not both")
    reference = None
    if start_1000 is not None:
        (start, end), reference = screen_points_to_ras(ctx, view, [start_1000, end_1000], image_id)
    else:
        start, end = np.asarray(start_ras, dtype=float), np.asarray(end_ras, dtype=float)
    for point in (start, end):
        check_inside(node, point)
    markups = add_markups(ctx, "vtkMRMLMarkupsLineNode", "line", label, [start, end])
    length = float(np.linalg.norm(end - start))
    data = {"length_mm": round(length, 3), "start_ras": np.round(start, 3).tolist(),
            "end_ras": np.round(end, 3).tolist(), "volume_name": node.GetName()}
    if reference is not None:
        data = with_reference(data, reference)
    result = capture(ctx, "line", label, data, markups, view)
    if view:
        result.images = render(ctx, view, size).images
    return result


@EVIDENCE.action("list_evidence", "evidence", "List the evidence captured so far in this episode.")
def list_evidence(ctx) -> Result:
    return Result(ok=True, data={"evidence": ctx.evidence.to_json()})


@EVIDENCE.action(
    "export_evidence", "evidence",
    "Write the evidence list (JSON) and its markups (.mrk.json) to the session's artifact folder.",
    {"name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$", "default": "evidence"}},
)
def export_evidence(ctx, name: str) -> Result:
    if ctx.artifacts_dir is None:
        raise ActionError("no_artifact_dir", "this session has no artifact folder configured")
    if not ctx.evidence.items:
        raise ActionError("no_evidence", "nothing has been captured yet")
    folder = fresh_path(ctx.artifacts_dir, name)
    folder.mkdir(parents=True)
    files = []
    for item in ctx.evidence.items:
        node = ctx.engine.scene.GetNodeByID(item.node_id) if item.node_id else None
        if node is None:
            continue
        target = folder / f"{re.sub(r'[^A-Za-z0-9_-]', '_', item.id)}.mrk.json"
        storage = slicer.vtkMRMLMarkupsJsonStorageNode()
        storage.SetFileName(str(target))
        if not storage.WriteData(node):
            raise ActionError("write_failed", f"could not write {target.name}")
        files.append(target)
    summary = folder / "evidence.json"
    write_json(summary, {"evidence": ctx.evidence.to_json()}, indent=2)
    files.insert(0, summary)
    artifacts = [{"kind": "evidence", "path": str(path), "sha256": sha256_file(path)} for path in files]
    return Result(ok=True, data={"folder": str(folder), "files": [str(path) for path in files]}, artifacts=artifacts)

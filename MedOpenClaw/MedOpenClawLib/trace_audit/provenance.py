"""Evidence provenance: every evidence field of the parsed answer traced to what the agent saw and did.

Rules (each field is *grounded* by the records listed, or *ungrounded*):

- **Key slice** ``key_slice_<view>_mm = v``: some shown image of that view (a slice image, or a tile of a cine
  montage) lies within half a slice step of ``v`` (the image's slice thickness; the displayed volume's spacing for
  montage tiles; :data:`DEFAULT_STEP_MM` when neither is recorded), plus :data:`ROUNDING_MM` for the answer's
  two-decimal rounding. Basis ``displayed``.
- **RAS point** ``p``: basis ``conversion`` when a successful call of the agent returned a RAS position within
  :data:`CONVERSION_TOLERANCE_MM` of ``p`` (``image_coords_to_ras``, the ends of ``measure_line``, the centre of
  ``draw_roi``, a segment centroid of ``quantify`` or a segmentation operator); else basis ``displayed`` when ``p``
  lies on a shown slice image: inside its pixel bounds and within half its slice thickness of its plane.
- **WSI localization** ``(x, y)``: basis ``conversion`` when ``viewer_point_to_wsi_coordinate`` returned a point
  within one screen pixel (its ``downsample``, at least 1 level-0 px) of it; else basis ``viewed_field`` when it lies
  inside a field the viewer showed zoomed in (a field seen only in the whole-slide overview localises nothing).
- **Measurement** (F2): a length, area or volume in the answer text -- an area (mm², cm²) or volume (mL, cc, cm³,
  mm³) always; a length (mm, cm) when its line names a measurement (:data:`MEASURE_WORDS`) or gives dimensions
  (``23 x 18 mm``), unless the line is about the acquisition (:data:`ACQUISITION_WORDS`: voxel size, spacing,
  slice thickness); evidence-field lines (``KEY_SLICE_*``, ``RAS``) are positions, not measurements -- is grounded
  (basis ``measured``) when ``measure_line`` (its length) or ``quantify`` / a segmentation operator (volume,
  longest and RANO diameters, bidimensional product) produced a value of that kind within
  max(:data:`RELATIVE_TOLERANCE` of it, the kind's absolute tolerance). A screen box converted to millimetres
  (``draw_roi``) measures nothing. Percentages are derived, not measured, and are not read.

The answer comes last in the trace, so what the calls produced is summarised as they stream by (:class:`Produced`:
each distinct returned point, WSI coordinate and measured value once, with the calls that produced it) and the
fields are judged against the summaries at the end.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from .bounded import Distinct, Seqs, capped_note, listed
from .findings import FieldProvenance
from .timeline import AXIS_INDEX, Call, Shown, Timeline, as_dict, as_list, number, point

if TYPE_CHECKING:
    import numpy as np

DEFAULT_STEP_MM = 1.0
ROUNDING_MM = 0.005
CONVERSION_TOLERANCE_MM = 1.0
PLANE_TOLERANCE_MM = 1e-3
RELATIVE_TOLERANCE = 0.05
ABSOLUTE_TOLERANCE = {"length": 1.0, "area": 10.0, "volume": 0.1}  # mm, mm², mL
MEASURE_WORDS = re.compile(r"\b(diameters?|measur\w*|sizes?|sized|length|long|wide|width|across|thick\w*|spd|"
                           r"products?|axis|axes|extent|dimensions?|volumes?|areas?)\b", re.IGNORECASE)
# unit -> (kind, factor to mm / mm² / mL)
UNITS = {"mm": ("length", 1.0), "cm": ("length", 10.0), "mm2": ("area", 1.0), "cm2": ("area", 100.0),
         "mm3": ("volume", 0.001), "cm3": ("volume", 1.0), "ml": ("volume", 1.0), "cc": ("volume", 1.0)}
KIND_UNIT = {"length": "mm", "area": "mm²", "volume": "mL"}  # what measurements are compared in
# lines about the acquisition, not the anatomy: a voxel size or slice thickness read off the metadata measures nothing
ACQUISITION_WORDS = re.compile(r"\b(voxels?|spacing|resolution|pixels?|field of view|fov|slice thickness|"
                               r"slice step|step)\b", re.IGNORECASE)
_NUMBER = r"\d+(?:\.\d+)?"
_MEASUREMENT = re.compile(
    rf"(?<![\w.])({_NUMBER})((?:\s*(?:x|×|by)\s*{_NUMBER}){{0,2}})\s*(mm|cm|ml|cc)(\^?[23²³])?(?![A-Za-z])",
    re.IGNORECASE)
_EVIDENCE_LINE = re.compile(r"^[\s>#*-]*(KEY[_ ]SLICE[_ ]\w+|RAS)\s*[:=]", re.IGNORECASE)
_POWER = {"2": "2", "²": "2", "3": "3", "³": "3"}


class Produced:
    """What the agent's successful calls returned that can ground an evidence field, fed one call at a time."""

    def __init__(self) -> None:
        self.points = Distinct("returned RAS points")  # (RAS, what) -> Seqs
        self.coordinates = Distinct("returned WSI coordinates")  # (x, y, tolerance) -> Seqs
        self.values = Distinct("measured values")  # (kind, value, what) -> Seqs

    def feed(self, call: Call) -> None:
        if not (call.by_agent and call.ok):
            return
        for seq, ras, what in returned_ras_points(call):
            _add(self.points, (tuple(ras), what), seq)
        for seq, kind, value, what in measured_values(call):
            _add(self.values, (kind, value, what), seq)
        if call.action == "viewer_point_to_wsi_coordinate":
            returned = (number(call.data.get("x")), number(call.data.get("y")))
            if None not in returned:
                tolerance = max(1.0, number(call.data.get("downsample")) or 1.0)
                _add(self.coordinates, (*returned, tolerance), call.seq)

    def limits(self) -> dict:
        return {**self.points.limit(), **self.coordinates.limit(), **self.values.limit()}


def _add(summary: Distinct, key: tuple, seq: int) -> None:
    seqs = summary.add(key, Seqs())
    if seqs is not None:
        seqs.add(seq)


def evidence_provenance(timeline: Timeline, produced: Produced, evidence_kind: str,
                        parsed: dict) -> list[FieldProvenance]:
    """Provenance of every evidence field of ``parsed`` (a module spec's ``read_answer`` result)."""
    fields: list[FieldProvenance] = []
    if evidence_kind == "radiology":
        evidence = as_dict(parsed.get("evidence"))
        for view in AXIS_INDEX:
            value = number(evidence.get(f"key_slice_{view}_mm"))
            if value is not None:
                fields.append(key_slice(timeline, view, value))
        ras = point(evidence.get("ras"), 3)
        if ras is not None:
            fields.append(ras_point(timeline, produced, ras))
    elif evidence_kind == "pathology":
        for index, item in enumerate(as_list(parsed.get("localizations"))):
            xy = point(item, 2)
            if xy is not None:
                fields.append(wsi_point(timeline, produced, f"localizations[{index}]", xy))
    fields.extend(measurements(timeline, produced))
    return fields


def _grounded(name: str, value, basis: str, groups: list[Seqs], note: str) -> FieldProvenance:
    records, capped = listed(groups)
    return FieldProvenance(name, value, True, basis, records, note + capped_note(capped))


def _ungrounded(name: str, value, note: str, *summaries: Distinct) -> FieldProvenance:
    """An ungrounded field; its note says when a summary it was judged against had to leave things out."""
    left = [f"{summary.dropped} {summary.what} beyond the audit's cap were not kept"
            for summary in summaries if summary.dropped]
    return FieldProvenance(name, value, False, None, [], "; ".join([note, *left]))


# ------------------------------------------------------------------------------------------------ key slices
def _half_step(shown: Shown) -> float:
    return (shown.step_mm if shown.step_mm and shown.step_mm > 0 else DEFAULT_STEP_MM) / 2.0


def key_slice(timeline: Timeline, view: str, value: float) -> FieldProvenance:
    name = f"key_slice_{view}_mm"
    seen = sorted((shown for shown in timeline.shown
                   if shown.view == view and abs(shown.offset_mm - value) <= _half_step(shown) + ROUNDING_MM),
                  key=lambda shown: abs(shown.offset_mm - value))
    if seen:
        return _grounded(name, value, "displayed", [shown.seqs for shown in seen],
                         f"{view} slice shown at {seen[0].offset_mm:g} mm")
    offsets = sorted({round(shown.offset_mm, 2) for shown in timeline.shown if shown.view == view})
    note = (f"no {view} image within half a slice of {value:g} mm; {view} offsets shown: "
            + (", ".join(f"{offset:g}" for offset in offsets[:12]) + (" ..." if len(offsets) > 12 else "")
               if offsets else "none"))
    return _ungrounded(name, value, note, timeline.shown_summary)


# ------------------------------------------------------------------------------------------------- RAS point
def returned_ras_points(call: Call) -> list[tuple[int, list[float], str]]:
    """(seq, RAS, what) of every position a successful agent call returned."""
    data = call.data
    candidates = []
    if call.action == "image_coords_to_ras":
        candidates.append((data.get("ras"), "image_coords_to_ras"))
    elif call.action == "measure_line":
        candidates += [(data.get("start_ras"), "measure_line start"), (data.get("end_ras"), "measure_line end")]
    elif call.action == "draw_roi":
        candidates.append((data.get("center_ras"), "draw_roi centre"))
    for statistics in region_statistics(call):
        candidates.append((statistics.get("centroid_ras"), f"{call.action} centroid"))
    return [(call.seq, ras, what) for ras, what in ((point(value, 3), what) for value, what in candidates)
            if ras is not None]


def matrix4(value) -> np.ndarray | None:
    """A 4x4 matrix of finite numbers from a record, or None."""
    import numpy as np  # numpy where a geometry is read, not where the CLI registers `trace audit` (--help)

    rows = [point(row, 4) for row in as_list(value)]
    return np.asarray(rows, dtype=float) if len(rows) == 4 and all(rows) else None


def project(geometry: dict, ras: list[float]) -> tuple[float, float, float] | None:
    """(column, row, plane distance mm) of ``ras`` on an image from its geometry record (the computation of
    ``viewer.image_geometry.SliceImageGeometry.ras_to_pixel``, kept free of the viewer's VTK imports)."""
    xy_to_ras, slice_to_ras = matrix4(geometry.get("xy_to_ras")), matrix4(geometry.get("slice_to_ras"))
    height = number(geometry.get("height"))
    if xy_to_ras is None or slice_to_ras is None or height is None:
        return None
    import numpy as np  # as in matrix4

    try:
        x, y = np.linalg.solve(xy_to_ras, np.array([*ras, 1.0]))[:2]
    except np.linalg.LinAlgError:
        return None
    normal = slice_to_ras[:3, 2]
    length = float(np.linalg.norm(normal))
    if length == 0 or not np.isfinite([x, y]).all():
        return None
    distance = float(np.dot(np.asarray(ras) - slice_to_ras[:3, 3], normal / length))
    return float(x), float(height - 1.0 - y), distance


def lies_on(shown: Shown, ras: list[float]) -> bool:
    geometry = as_dict(shown.geometry)
    projected = project(geometry, ras)
    width, height = number(geometry.get("width")), number(geometry.get("height"))
    if projected is None or width is None or height is None:
        return False
    column, row, distance = projected
    return (-0.5 <= column <= width - 0.5 and -0.5 <= row <= height - 0.5
            and abs(distance) <= _half_step(shown) + PLANE_TOLERANCE_MM)


def ras_point(timeline: Timeline, produced: Produced, ras: list[float]) -> FieldProvenance:
    import numpy as np  # as in matrix4

    target = np.asarray(ras)
    converted = [(seqs, what) for (value, what), seqs in produced.points.items.items()
                 if float(np.linalg.norm(np.asarray(value) - target)) <= CONVERSION_TOLERANCE_MM]
    if converted:
        return _grounded("ras", ras, "conversion", [seqs for seqs, _ in converted], f"returned by {converted[0][1]}")
    on = [shown for shown in timeline.shown if shown.geometry and lies_on(shown, ras)]
    if on:
        return _grounded("ras", ras, "displayed", [shown.seqs for shown in on], f"lies on a shown {on[0].view} image")
    return _ungrounded("ras", ras, "no conversion returned this point and it lies on no shown slice image",
                       produced.points, timeline.shown_summary)


# ---------------------------------------------------------------------------------------------- WSI points
def wsi_point(timeline: Timeline, produced: Produced, name: str, xy: list[float]) -> FieldProvenance:
    converted = [seqs for (x, y, tolerance), seqs in produced.coordinates.items.items()
                 if abs(x - xy[0]) <= tolerance and abs(y - xy[1]) <= tolerance]
    if converted:
        return _grounded(name, xy, "conversion", converted, "returned by viewer_point_to_wsi_coordinate")
    inside = [found for found in timeline.viewed_fields
              if found.field[0] <= xy[0] <= found.field[2] and found.field[1] <= xy[1] <= found.field[3]]
    zoomed = [found.seqs for found in inside if not found.overview]
    if zoomed:
        return _grounded(name, xy, "viewed_field", zoomed, "inside a field viewed zoomed in")
    note = ("seen only in the whole-slide overview" if inside
            else "no conversion returned this point and no viewed field contains it")
    return _ungrounded(name, xy, note, produced.coordinates, timeline.fields_summary)


# -------------------------------------------------------------------------------------------- measurements
def region_statistics(call) -> list[dict]:
    """The region statistics a call returned (``quantify``'s, or each segment's of a segmentation operator)."""
    found = [as_dict(call.data.get("statistics"))] if call.data.get("statistics") else []
    found += [as_dict(item) for item in as_list(call.data.get("segments"))]
    return [item for item in found if item]


def measured_values(call: Call) -> list[tuple[int, str, float, str]]:
    """(seq, kind, value in mm / mm² / mL, what) of every measurement a successful agent call produced."""
    values = []
    if call.action == "measure_line":
        values.append((call.seq, "length", number(call.data.get("length_mm")), "measure_line length"))
    for statistics in region_statistics(call):
        rano = as_dict(statistics.get("rano"))
        values += [
            (call.seq, "volume", number(statistics.get("volume_ml")), f"{call.action} volume"),
            (call.seq, "length", number(statistics.get("longest_diameter_mm")), f"{call.action} diameter"),
            (call.seq, "length", number(rano.get("longest_diameter_mm")), f"{call.action} RANO diameter"),
            (call.seq, "length", number(rano.get("perpendicular_diameter_mm")), f"{call.action} RANO perpendicular"),
            (call.seq, "area", number(rano.get("bidimensional_product_mm2")), f"{call.action} RANO product"),
        ]
    return [item for item in values if item[2] is not None]


def reported_measurements(text: str | None) -> list[tuple[str, str, float]]:
    """(matched text, kind, value in mm / mm² / mL) of every measurement the answer text reports."""
    found = []
    for line in (text or "").splitlines():
        if _EVIDENCE_LINE.match(line):
            continue
        named, acquisition = bool(MEASURE_WORDS.search(line)), bool(ACQUISITION_WORDS.search(line))
        for match in _MEASUREMENT.finditer(line):
            unit = match.group(3).lower() + _POWER.get(match.group(4)[-1] if match.group(4) else "", "")
            if unit not in UNITS:
                continue
            kind, factor = UNITS[unit]
            dimensions = bool(match.group(2))
            if kind == "length" and (acquisition or not (dimensions or named)):
                continue
            numbers = [match.group(1)] + re.findall(_NUMBER, match.group(2) or "")
            found += [(match.group(0).strip(), kind, float(value) * factor) for value in numbers]
    return [item for item in found if math.isfinite(item[2])]


def measurements(timeline: Timeline, produced: Produced) -> list[FieldProvenance]:
    fields = []
    for index, (text, kind, value) in enumerate(reported_measurements(timeline.final_text)):
        backing = [(seqs, what) for (other_kind, measured, what), seqs in produced.values.items.items()
                   if other_kind == kind and abs(measured - value)
                   <= max(RELATIVE_TOLERANCE * abs(measured), ABSOLUTE_TOLERANCE[kind])]
        name = f"measurement[{index}]"
        shown = {"text": text, "kind": kind, "value": round(value, 4),
                 "label": f"{round(value, 4):g} {KIND_UNIT[kind]} in {text!r}"}
        if backing:
            fields.append(_grounded(name, shown, "measured", [seqs for seqs, _ in backing],
                                    f"produced by {backing[0][1]}"))
        else:
            fields.append(_ungrounded(name, shown, f"no measure_line or quantify result gives this {kind}",
                                      produced.values))
    return fields

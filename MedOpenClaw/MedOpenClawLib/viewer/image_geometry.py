"""One geometry record per rendered slice image, and the session's memory of which image the agent saw.

A 0..999 screen point names a pixel of an image the agent was shown, so it is mapped through the geometry that
image was rendered with -- never through the live slice node, which the 3D Slicer GUI resizes on every view
resize (qMRMLSliceControllerWidget::setSliceViewSize -> vtkMRMLSliceLogic::ResizeSliceNode) and a clinician may
pan, zoom or scroll between two agent turns. The same records drive headless sessions and the GUI.

Policy when the view moved after the image was returned: the point is mapped on the image the agent saw (the
pixel it pointed at has one RAS position, whatever the view does later), and the result says so in
``data.warnings``. An explicit ``image_id`` selects an older image of the same session.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..core.result import ActionError
from .geometry import AXIS_LETTER, screen_to_xy, xy_to_pixel

# geometries kept for explicit image ids; older ones are refused with a clear error
IMAGE_HISTORY = 256
# how far (mm) a view may move before a result warns that the agent's image no longer shows the live view
MOVED_TOLERANCE_MM = 1e-3


@dataclass(frozen=True)
class SliceImageGeometry:
    """How one rendered slice image maps to patient space (RAS mm).

    ``xy_to_ras`` maps VTK pixel coordinates of the image (origin bottom-left, pixel centres at integers) to
    RAS; ``slice_to_ras`` is the slice plane (columns: in-plane axes, normal, plane origin).
    """

    image_id: str
    view: str
    width: int
    height: int
    xy_to_ras: np.ndarray
    slice_to_ras: np.ndarray
    field_of_view_mm: tuple[float, float, float]
    slice_offset_mm: float

    @property
    def normal(self) -> np.ndarray:
        normal = self.slice_to_ras[:3, 2]
        return normal / np.linalg.norm(normal)

    def xy_to_ras_point(self, x: float, y: float) -> np.ndarray:
        return (self.xy_to_ras @ np.array([x, y, 0.0, 1.0]))[:3]

    def screen_to_ras(self, point_1000) -> np.ndarray:
        """RAS (mm) of a 0..999 point (top-left origin) on this image."""
        return self.xy_to_ras_point(*screen_to_xy(point_1000, self.width, self.height))

    def ras_to_xy(self, ras) -> np.ndarray:
        """VTK XY pixel coordinates of ``ras`` projected on the image, and its signed distance (mm) from the
        image's plane, as (x, y, d)."""
        ras = np.asarray(ras, dtype=float)
        xy = np.linalg.solve(self.xy_to_ras, np.array([*ras, 1.0]))
        distance = float(np.dot(ras - self.slice_to_ras[:3, 3], self.normal))
        return np.array([xy[0], xy[1], distance])

    def ras_to_pixel(self, ras) -> np.ndarray:
        """Image column/row (top-left origin, pixel centres at integers) and plane distance, as (col, row, d)."""
        x, y, distance = self.ras_to_xy(ras)
        return np.array([*xy_to_pixel(x, y, self.height), distance])

    def ras_to_screen(self, ras) -> np.ndarray:
        """The 0..999 point of ``ras`` on this image (inverse of :meth:`screen_to_ras`) and its plane distance."""
        x, y, distance = self.ras_to_xy(ras)
        u = (x + 0.5) * 1000.0 / self.width - 0.5
        v = (self.height - 0.5 - y) * 1000.0 / self.height - 0.5
        return np.array([u, v, distance])

    def to_json(self) -> dict:
        return {
            "view": self.view,
            "width": self.width,
            "height": self.height,
            "xy_to_ras": np.round(self.xy_to_ras, 6).tolist(),
            "slice_to_ras": np.round(self.slice_to_ras, 6).tolist(),
            "field_of_view_mm": [round(float(value), 4) for value in self.field_of_view_mm],
            "slice_offset_mm": round(float(self.slice_offset_mm), 3),
        }

    @classmethod
    def from_json(cls, data: dict, image_id: str | None = None) -> SliceImageGeometry:
        """Rebuild a record from :meth:`to_json` (an image of a result or audit trace, or an evidence item's
        ``view_state["image"]``), e.g. to draw evidence on the image it was read on, offline."""
        return cls(
            image_id=image_id or data.get("image_id") or "",
            view=data["view"],
            width=int(data["width"]),
            height=int(data["height"]),
            xy_to_ras=np.asarray(data["xy_to_ras"], dtype=float),
            slice_to_ras=np.asarray(data["slice_to_ras"], dtype=float),
            field_of_view_mm=tuple(float(value) for value in data["field_of_view_mm"]),
            slice_offset_mm=float(data["slice_offset_mm"]),
        )

    def changes_since(self, slice_to_ras: np.ndarray, field_of_view_mm, slice_offset_mm: float) -> list[str]:
        """How a live view (its plane, the square field of view it renders now, its offset) differs from this
        image, in words; empty when it would render the same image."""
        changes = []
        if abs(slice_offset_mm - self.slice_offset_mm) > MOVED_TOLERANCE_MM:
            changes.append(f"slice moved from {AXIS_LETTER[self.view]} {self.slice_offset_mm:.2f} to "
                           f"{slice_offset_mm:.2f} mm")
        if not np.allclose(slice_to_ras[:3, :3], self.slice_to_ras[:3, :3], atol=1e-6):
            changes.append("view reoriented")
        if not np.allclose(field_of_view_mm[:2], self.field_of_view_mm[:2], atol=MOVED_TOLERANCE_MM):
            before, now = self.field_of_view_mm, field_of_view_mm
            changes.append(f"field of view changed from {before[0]:.1f} x {before[1]:.1f} to "
                           f"{now[0]:.1f} x {now[1]:.1f} mm")
        in_plane = slice_to_ras[:3, 3] - self.slice_to_ras[:3, 3]
        shift = in_plane - np.dot(in_plane, self.normal) * self.normal
        if np.linalg.norm(shift) > MOVED_TOLERANCE_MM:
            changes.append(f"view panned by {np.linalg.norm(shift):.1f} mm")
        return changes


class ImageLog:
    """The geometries of the images a session returned: the last one per view, and recent ones by id.

    Ids come from a counter that never rolls back, so an id names one image for the whole session, and a replay
    of the same trace hands out the same ids.
    """

    def __init__(self, history: int = IMAGE_HISTORY):
        self.history = history
        self._by_id: OrderedDict[str, SliceImageGeometry] = OrderedDict()
        self._last: dict[str, str] = {}
        self._counter = 0

    def next_id(self) -> str:
        self._counter += 1
        return f"img-{self._counter}"

    def returned(self, images) -> None:
        """Remember the images an action returns; images without a slice geometry (montages, WSI) are skipped."""
        for image in images:
            geometry = getattr(image, "geometry", None)
            if not isinstance(geometry, SliceImageGeometry):
                continue
            self._by_id[geometry.image_id] = geometry
            self._by_id.move_to_end(geometry.image_id)
            self._last[geometry.view] = geometry.image_id
            while len(self._by_id) > self.history:
                self._by_id.popitem(last=False)

    def last(self, view: str) -> SliceImageGeometry | None:
        image_id = self._last.get(view)
        return self._by_id.get(image_id) if image_id else None

    def get(self, image_id: str) -> SliceImageGeometry | None:
        return self._by_id.get(image_id)

    def seen(self, view: str, image_id: str | None = None) -> SliceImageGeometry:
        """The image 0..999 arguments for ``view`` refer to: ``image_id`` if given, else the last one returned."""
        if image_id is not None:
            geometry = self._by_id.get(image_id)
            if geometry is None:
                raise ActionError("unknown_image", f"no image {image_id!r} in this session (ids of the last "
                                                   f"{self.history} returned slice images are kept)")
            if geometry.view != view:
                raise ActionError("invalid_argument",
                                  f"image {image_id} shows the {geometry.view} view, not the {view} view")
            return geometry
        geometry = self.last(view)
        if geometry is None:
            raise ActionError("no_image", f"no {view} image was returned in this session yet, so 0..999 "
                                          f"coordinates have nothing to refer to; call observe first")
        return geometry

    def checkpoint(self) -> tuple:
        return OrderedDict(self._by_id), dict(self._last)

    def rollback(self, token: tuple) -> None:
        """Forget images of a failed call (they were never returned); the id counter does not go back."""
        self._by_id, self._last = OrderedDict(token[0]), dict(token[1])

"""Spatial look-ups behind the evidence gates: RAS points and key slices against voxel masks, WSI points
against polygons. Everything goes through the mask's own affine, so LPS-stored, anisotropic and oblique volumes are
handled the same way as the viewer displays them.

Key-slice rule (documented decision): a key-slice offset passes when it lies within
``[min - h, max + h]`` of the mask voxel *centres'* coordinate on that RAS axis, where ``h`` is half a voxel's
extent projected on that axis (``0.5 * sum_j |affine[axis, j]|``). A slice plane anywhere inside a boundary
voxel therefore passes (the viewer shows that voxel there); one voxel spacing beyond the boundary centre fails.
RAS-point rule: the point is mapped to continuous voxel indices with the inverse affine; it passes when a
mask voxel contains it.

WSI rule: the reference regions are shapely geometries -- a GeoJSON MultiPolygon's parts, interior rings as holes,
a self-intersecting ASAP outline repaired -- and the area a click must hit is the union of the target regions
minus the union of the exclusion regions (:func:`evidence_area`); a click inside a hole or an exclusion misses.

Boundary rule (one for all three look-ups; MedFlow-Bench is silent): regions are closed sets -- a point exactly on
a boundary belongs to the region, on every side alike, within 1e-6 (voxels for RAS points, mm for key slices)
or 1e-9 of the coordinates' magnitude (WSI points). So a RAS point on the face shared by a mask voxel and the
background passes whether that face is the mask's low-index or high-index side (also on the array's outer
faces), a key slice on either end of the half-voxel range passes, and a WSI click on the evidence area's
boundary hits it: an outer edge, a hole's edge, or an exclusion's edge inside a tumour (the closure of tumour
minus exclusion).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

AXES = ("R", "A", "S")
FACE_TOLERANCE = 1e-6  # voxels: how close to a face a RAS point counts as on it
KEY_SLICE_AXIS = {"axial": "S", "sagittal": "R", "coronal": "A"}


@dataclass(frozen=True)
class VoxelMask:
    """A binary mask with the 4x4 voxel-to-RAS affine of the series it is defined on."""

    data: np.ndarray  # bool, 3-D
    affine: np.ndarray

    def ras_ranges(self) -> dict[str, tuple[float, float]]:
        """Per RAS axis: (lowest, highest) coordinate covered by mask voxels, half-voxel rule included."""
        box = self._box()
        if box is None:
            raise ValueError("mask is empty")
        # the voxels of the mask's bounding box only (a tumour is a small part of a CT: a tenth of the time)
        indices = np.argwhere(self.data[box]) + [axis.start for axis in box]
        linear = self.affine[:3, :3]
        centres = indices @ linear.T + self.affine[:3, 3]
        half = 0.5 * np.abs(linear).sum(axis=1)
        low = centres.min(axis=0) - half
        high = centres.max(axis=0) + half
        return {axis: (float(low[k]), float(high[k])) for k, axis in enumerate(AXES)}

    def voxels_at(self, ras) -> list[tuple[int, int, int]]:
        """Indices of the voxels whose closed cells contain RAS point ``ras`` (one inside a voxel, two to eight
        on shared faces, edges or corners), within the array."""
        point = np.append(np.asarray(ras, dtype=float), 1.0)
        ijk = np.linalg.solve(self.affine, point)[:3]
        candidates = []
        for value in ijk:
            low = int(np.floor(value + 0.5 - FACE_TOLERANCE))
            high = int(np.floor(value + 0.5 + FACE_TOLERANCE))
            candidates.append(sorted({low, high}))
        shape = self.data.shape
        return [(i, j, k) for i in candidates[0] for j in candidates[1] for k in candidates[2]
                if 0 <= i < shape[0] and 0 <= j < shape[1] and 0 <= k < shape[2]]

    def contains(self, ras) -> bool:
        if not np.all(np.isfinite(np.asarray(ras, dtype=float))):
            return False
        return any(bool(self.data[index]) for index in self.voxels_at(ras))

    def _box(self) -> tuple[slice, slice, slice] | None:
        """The mask's bounding box (None when it is empty), each axis's span from one any() over the others:
        scipy's find_objects took 5x the CPU on a C-ordered CT mask, 40x on a Fortran-ordered (transposed) one."""
        spans = []
        for axis in range(self.data.ndim):
            hit = np.flatnonzero(self.data.any(axis=tuple(other for other in range(self.data.ndim) if other != axis)))
            if not hit.size:
                return None
            spans.append(slice(int(hit[0]), int(hit[-1]) + 1))
        return tuple(spans)

    def interior_reference(self) -> tuple[list[float], dict[str, float]]:
        """A voxel centre deep inside the mask (largest distance to the boundary) and its key-slice offsets.

        Used to give the privileged oracle agent evidence that must pass; the point is a voxel centre, so the
        nearest-voxel rule maps it back onto a mask voxel for any affine.
        """
        from scipy import ndimage

        # only the mask's bounding box, padded by one background voxel: every voxel's nearest background voxel
        # lies in it (clamping one outside onto the pad brings it closer), so the distances, and the first
        # deepest voxel in C order, are those of the whole volume at a fraction of the cost
        box = self._box() or tuple(slice(0, size) for size in self.data.shape)
        distance = ndimage.distance_transform_edt(np.pad(self.data[box], 1))[1:-1, 1:-1, 1:-1]
        index = tuple(int(axis.start or 0) + int(offset) for axis, offset in
                      zip(box, np.unravel_index(int(np.argmax(distance)), distance.shape)))
        ras = (self.affine @ np.array([*index, 1.0]))[:3]
        point = [round(float(value), 4) for value in ras]
        return point, {view: point[AXES.index(axis)] for view, axis in KEY_SLICE_AXIS.items()}


def key_slice_in_range(offset: float | None, ranges: dict[str, tuple[float, float]], view: str) -> bool:
    """Whether a key-slice offset of ``view`` (axial/sagittal/coronal) lies within the mask's axis range."""
    if offset is None or not np.isfinite(offset):
        return False
    low, high = ranges[KEY_SLICE_AXIS[view]]
    return low - 1e-6 <= offset <= high + 1e-6


@functools.lru_cache(maxsize=64)
def load_mask(path: str) -> VoxelMask:
    """Read a NIfTI/NRRD mask with nibabel (cached: many responses are scored against the same case)."""
    import nibabel as nib

    image = nib.load(path)
    data = np.asarray(image.dataobj)
    while data.ndim > 3:
        data = data[..., 0]
    return VoxelMask(data > 0, np.asarray(image.affine, dtype=float))


def mask_from_file(path: str | Path) -> VoxelMask:
    return load_mask(str(Path(path).resolve()))


# ------------------------------------------------------------------------------------------------ WSI regions
def region_geometry(region: dict):
    """A ground-truth region record as a valid shapely geometry: its ``polygon`` (outer ring) minus its ``holes``
    (GeoJSON interior rings). A self-intersecting outline is repaired by shapely's ``make_valid`` (structure
    method: the area it encloses), so a figure-eight becomes a MultiPolygon instead of a misread ring."""
    import shapely

    shell = [(float(x), float(y)) for x, y in region["polygon"]]
    holes = [[(float(x), float(y)) for x, y in ring] for ring in region.get("holes") or []]
    if len(shell) < 3:
        return shapely.Polygon()
    polygon = shapely.Polygon(shell, [ring for ring in holes if len(ring) >= 3])
    if not polygon.is_valid:
        polygon = shapely.make_valid(polygon, method="structure", keep_collapsed=False)
    return _polygonal(polygon)


def _polygonal(geometry):
    """Only the areas of a geometry (a repair or a difference may leave lines and points behind)."""
    import shapely

    if isinstance(geometry, (shapely.Polygon, shapely.MultiPolygon)):
        return geometry
    areas = (shapely.Polygon, shapely.MultiPolygon)
    parts = [part for part in getattr(geometry, "geoms", ()) if isinstance(part, areas)]
    return shapely.union_all(parts) if parts else shapely.Polygon()


def evidence_area(targets: list[dict], exclusions: list[dict] = ()):
    """The closed set a WSI localization must hit: the union of the target regions (holes honoured) minus the
    union of the exclusion regions."""
    import shapely

    area = shapely.union_all([region_geometry(region) for region in targets])
    if exclusions:
        area = area.difference(shapely.union_all([region_geometry(region) for region in exclusions]))
    return _polygonal(area)


def area_covers(area, x: float, y: float) -> bool:
    """The boundary rule for WSI points: ``area`` is closed, so a point on its outline, a hole's edge or an
    exclusion's edge (within 1e-9 of the coordinates' magnitude) counts as inside; a point strictly inside a
    hole or an exclusion does not."""
    import shapely

    if area.is_empty or not (np.isfinite(x) and np.isfinite(y)):
        return False
    scale = max(1.0, abs(float(x)), abs(float(y)), *map(abs, area.bounds))
    return bool(shapely.dwithin(area, shapely.Point(float(x), float(y)), 1e-9 * scale))


MIN_CLEARANCE_PX = 0.5  # a reference point at least this far from every edge of its area, after rounding
REFERENCE_DECIMALS = 2


def interior_reference_point(area) -> list[float]:
    """A point well inside ``area`` (for oracle evidence): shapely's ``polylabel`` (the pole of inaccessibility)
    of its largest part, rounded to 0.01 px and re-checked after rounding: inside the area and at least
    :data:`MIN_CLEARANCE_PX` from every edge, hole and exclusion. ValueError when the area has no such point."""
    import shapely
    from shapely.ops import polylabel

    parts = [part for part in getattr(area, "geoms", [area]) if not part.is_empty]
    if not parts:
        raise ValueError("nothing of the region remains outside the exclusions")
    part = max(parts, key=lambda polygon: polygon.area)
    size = max(part.bounds[2] - part.bounds[0], part.bounds[3] - part.bounds[1])
    pole = polylabel(part, tolerance=max(0.05, 1e-3 * size))
    point = [round(float(pole.x), REFERENCE_DECIMALS), round(float(pole.y), REFERENCE_DECIMALS)]
    rounded = shapely.Point(point)
    if not area.contains(rounded) or area.boundary.distance(rounded) < MIN_CLEARANCE_PX:
        raise ValueError(f"no interior point {MIN_CLEARANCE_PX} px clear of its edges and exclusions")
    return point

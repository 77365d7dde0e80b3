"""Spatial look-ups behind the evidence gates: RAS points and key slices against voxel masks, WSI points
against polygons. Everything goes through the mask's own affine, so LPS-stored, anisotropic and oblique volumes are
handled the same way as the viewer displays them.

Key-slice rule (documented decision): a key-slice offset passes when it lies within
``[min - h, max + h]`` of the mask voxel *centres'* coordinate on that RAS axis, where ``h`` is half a voxel's
extent projected on that axis (``0.5 * sum_j |affine[axis, j]|``). A slice plane anywhere inside a boundary
voxel therefore passes (the viewer shows that voxel there); one voxel spacing beyond the boundary centre fails.
RAS-point rule: the point is mapped to continuous voxel indices with the inverse affine; it passes when a
mask voxel contains it.

Boundary rule (one for all three look-ups; MedFlow-Bench is silent): regions are closed sets -- a point exactly on
a boundary belongs to the region, on every side alike, within 1e-6 (voxels for RAS points, mm for key slices,
relative to the polygon's coordinates for WSI points). So a RAS point on the face shared by a mask voxel and
the background passes whether that face is the mask's low-index or high-index side (also on the array's outer
faces), a key slice on either end of the half-voxel range passes, and a WSI click on a polygon edge or vertex
hits it (an edge shared with an exclusion region is therefore excluded).
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
        indices = np.argwhere(self.data)
        if indices.size == 0:
            raise ValueError("mask is empty")
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

    def interior_reference(self) -> tuple[list[float], dict[str, float]]:
        """A voxel centre deep inside the mask (largest distance to the boundary) and its key-slice offsets.

        Used to give the privileged oracle agent evidence that must pass; the point is a voxel centre, so the
        nearest-voxel rule maps it back onto a mask voxel for any affine.
        """
        from scipy import ndimage

        # only the mask's bounding box, padded by one background voxel: every voxel's nearest background voxel
        # lies in it (clamping one outside onto the pad brings it closer), so the distances, and the first
        # deepest voxel in C order, are those of the whole volume at a fraction of the cost
        box = next(iter(ndimage.find_objects(self.data.view(np.uint8))), tuple(map(slice, self.data.shape)))
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


def point_in_polygon(x: float, y: float, polygon) -> bool:
    """Even-odd ray casting; points exactly on an edge count as inside (a click on the outline is a hit)."""
    vertices = np.asarray(polygon, dtype=float)
    if len(vertices) < 3:
        return False
    x0, y0 = vertices[:, 0], vertices[:, 1]
    x1, y1 = np.roll(x0, -1), np.roll(y0, -1)
    cross = (x1 - x0) * (y - y0) - (y1 - y0) * (x - x0)
    on_segment = (
        (np.abs(cross) <= 1e-9 * max(1.0, float(np.abs(vertices).max())))
        & (np.minimum(x0, x1) <= x)
        & (x <= np.maximum(x0, x1))
        & (np.minimum(y0, y1) <= y)
        & (y <= np.maximum(y0, y1))
    )
    if on_segment.any():
        return True
    straddles = (y0 > y) != (y1 > y)
    with np.errstate(divide="ignore", invalid="ignore"):
        x_cross = x0 + (y - y0) * (x1 - x0) / (y1 - y0)
    return bool(np.count_nonzero(straddles & (x < x_cross)) % 2)


def polygon_interior_point(polygon, avoid=()) -> list[float]:
    """A point strictly inside ``polygon`` and outside every polygon in ``avoid`` (for oracle evidence).

    Scans horizontal lines through the polygon and takes the midpoint of the widest inside interval that is
    clear of the avoided polygons; deterministic for a given polygon.
    """
    vertices = np.asarray(polygon, dtype=float)
    y_min, y_max = vertices[:, 1].min(), vertices[:, 1].max()
    best = None
    for fraction in np.linspace(0.05, 0.95, 37):
        y = y_min + fraction * (y_max - y_min)
        xs = []
        for (ax, ay), (bx, by) in zip(vertices, np.roll(vertices, -1, axis=0)):
            if (ay > y) != (by > y):
                xs.append(ax + (y - ay) * (bx - ax) / (by - ay))
        xs.sort()
        for left, right in zip(xs[0::2], xs[1::2]):
            for candidate_x in np.linspace(left, right, 9)[1:-1]:
                if any(point_in_polygon(candidate_x, y, other) for other in avoid):
                    continue
                margin = min(candidate_x - left, right - candidate_x)
                if best is None or margin > best[0]:
                    best = (margin, [round(float(candidate_x), 2), round(float(y), 2)])
    if best is None:
        raise ValueError("polygon has no interior point clear of the exclusions")
    return best[1]

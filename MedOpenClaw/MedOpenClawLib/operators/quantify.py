"""Statistics of a mask on a volume: size, intensities, position, and RANO-style diameters.

Diameters are measured between the outer edges of the voxels (a one-voxel region is one voxel wide), in mm.
The bidimensional measurement follows RANO: on the axial slice where the region's longest in-plane diameter
is largest, that diameter times the longest chord perpendicular to it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.dependencies import require
from .image import ImageVolume

_CORNERS = np.array([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)])


@dataclass
class RegionStatistics:
    voxel_count: int
    volume_ml: float
    mean: float
    std: float
    minimum: float
    maximum: float
    centroid_ras: list[float]
    bbox_ras: list[list[float]]  # [[R, A, S] min corner, max corner] of the voxel edges
    longest_diameter_mm: float  # 3-D
    axial_longest_diameter_mm: float
    axial_perpendicular_diameter_mm: float
    axial_slice_s_mm: float | None
    suv_max: float | None = None
    suv_mean: float | None = None

    @property
    def bidimensional_product_mm2(self) -> float:
        return self.axial_longest_diameter_mm * self.axial_perpendicular_diameter_mm

    def to_json(self) -> dict:
        def rounded(value):
            return None if value is None else round(float(value), 3)

        return {
            "voxel_count": self.voxel_count,
            "volume_ml": rounded(self.volume_ml),
            "mean": rounded(self.mean),
            "std": rounded(self.std),
            "min": rounded(self.minimum),
            "max": rounded(self.maximum),
            "suv_max": rounded(self.suv_max),
            "suv_mean": rounded(self.suv_mean),
            "centroid_ras": [rounded(value) for value in self.centroid_ras],
            "bbox_ras": [[rounded(value) for value in corner] for corner in self.bbox_ras],
            "longest_diameter_mm": rounded(self.longest_diameter_mm),
            "rano": {
                "axial_slice_s_mm": rounded(self.axial_slice_s_mm),
                "longest_diameter_mm": rounded(self.axial_longest_diameter_mm),
                "perpendicular_diameter_mm": rounded(self.axial_perpendicular_diameter_mm),
                "bidimensional_product_mm2": rounded(self.bidimensional_product_mm2),
            },
        }


def region_statistics(volume: ImageVolume, mask: np.ndarray, suv_factor: float | None = None) -> RegionStatistics:
    """Statistics of ``volume`` inside ``mask`` (same grid); ``suv_factor`` converts values to SUV (PET)."""
    if mask.shape != volume.array.shape:
        raise ValueError(f"mask shape {mask.shape} does not match volume shape {volume.array.shape}")
    if not mask.any():
        raise ValueError("the region is empty")
    values = volume.array[mask].astype(np.float64)
    kji = np.argwhere(mask)
    ijk = kji[:, ::-1].astype(float)
    centres = volume.ijk_to_ras_points(ijk)
    corners = _edge_corners(volume, mask)
    axial_long, axial_perp, axial_s = _axial_diameters(volume, mask)
    return RegionStatistics(
        voxel_count=int(mask.sum()),
        volume_ml=float(mask.sum() * volume.voxel_volume_mm3 / 1000.0),
        mean=float(values.mean()),
        std=float(values.std()),
        minimum=float(values.min()),
        maximum=float(values.max()),
        centroid_ras=[float(value) for value in centres.mean(axis=0)],
        bbox_ras=[corners.min(axis=0).tolist(), corners.max(axis=0).tolist()],
        longest_diameter_mm=max_distance(corners),
        axial_longest_diameter_mm=axial_long,
        axial_perpendicular_diameter_mm=axial_perp,
        axial_slice_s_mm=axial_s,
        suv_max=None if suv_factor is None else float(values.max() * suv_factor),
        suv_mean=None if suv_factor is None else float(values.mean() * suv_factor),
    )


def hull_vertices(points: np.ndarray) -> np.ndarray:
    """The points on the convex hull (the only candidates for a largest distance); all of them when the points
    are coplanar or collinear. scipy is imported here, where it is used."""
    require("track_b")
    from scipy.spatial import ConvexHull, QhullError

    try:
        return points[ConvexHull(points).vertices]
    except (QhullError, ValueError):  # degenerate: every point may be extreme
        return points


def unique_rows(points: np.ndarray) -> np.ndarray:
    """``np.unique(points, axis=0)`` (the same rows, in the same lexicographic order) by one stable lexsort of the
    columns: numpy's row-wise unique sorts a structured view, 5-10x slower on the tens of thousands of voxel
    corners of a segment's boundary, which every segmentation's statistics deduplicate."""
    ordered = points[np.lexsort(points.T[::-1])]
    keep = np.ones(len(ordered), dtype=bool)
    keep[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    return ordered[keep]


def max_distance(points: np.ndarray) -> float:
    """Largest pairwise distance, through the convex hull so large regions stay cheap."""
    points = unique_rows(np.asarray(points, dtype=float))
    if len(points) < 2:
        return 0.0
    points = hull_vertices(points)
    best = 0.0
    for start in range(0, len(points), 512):
        block = points[start : start + 512]
        best = max(best, float(np.sqrt(((block[:, None, :] - points[None, :, :]) ** 2).sum(-1)).max()))
    return best


def _edge_corners(volume: ImageVolume, mask: np.ndarray) -> np.ndarray:
    """RAS of the outer corners of the boundary voxels (interior voxels cannot be extreme)."""
    padded = np.pad(mask, 1)
    interior = padded[1:-1, 1:-1, 1:-1].copy()
    for axis in range(3):
        for shift in (-1, 1):
            interior &= np.roll(padded, shift, axis=axis)[1:-1, 1:-1, 1:-1]
    boundary = np.argwhere(mask & ~interior)[:, ::-1].astype(float)
    return volume.ijk_to_ras_points((boundary[:, None, :] + _CORNERS[None]).reshape(-1, 3))


def _slice_axis(volume: ImageVolume) -> int:
    """The voxel axis (0=i, 1=j, 2=k) closest to the RAS superior direction: the axial slice normal."""
    directions = volume.ijk_to_ras[:3, :3] / volume.spacing
    return int(np.argmax(np.abs(directions[2])))


def _axial_diameters(volume: ImageVolume, mask: np.ndarray) -> tuple[float, float, float | None]:
    """(longest diameter, longest perpendicular chord, S of that slice) over the axial slices of the region."""
    axis = _slice_axis(volume)
    array_axis = 2 - axis  # arrays are [k, j, i]
    first, second = (index for index in range(3) if index != axis)
    columns = volume.ijk_to_ras[:3, :3]
    e1 = columns[:, first] / np.linalg.norm(columns[:, first])
    normal = np.cross(columns[:, first], columns[:, second])
    e2 = np.cross(normal / np.linalg.norm(normal), e1)
    to_plane = np.stack([columns[:, first], columns[:, second]], axis=1)  # in-plane voxel step -> RAS
    plane_2d = np.stack([e1, e2]) @ to_plane  # in-plane voxel step -> 2-D mm
    pixel_mm = float(min(volume.spacing[first], volume.spacing[second]))
    corner_offsets = np.array([[x, y] for x in (-0.5, 0.5) for y in (-0.5, 0.5)])
    best = (0.0, 0.0, None)
    for position in np.flatnonzero(mask.any(axis=tuple(a for a in range(3) if a != array_axis))):
        pixels = np.argwhere(np.take(mask, position, axis=array_axis))[:, ::-1].astype(float)
        centres = pixels @ plane_2d.T
        corners = ((pixels[:, None, :] + corner_offsets[None]).reshape(-1, 2)) @ plane_2d.T
        longest, major = _longest_pair_2d(corners)
        if longest > best[0]:
            across = np.array([-major[1], major[0]])
            bins = np.repeat(np.floor(centres @ major / pixel_mm).astype(int), 4)
            projected = corners @ across
            perpendicular = max(
                float(np.ptp(projected[bins == value])) for value in np.unique(bins)
            )
            ijk = np.zeros(3)
            ijk[axis] = position
            best = (longest, perpendicular, float(volume.ijk_to_ras_points(ijk)[0, 2]))
    return best


def _longest_pair_2d(points: np.ndarray) -> tuple[float, np.ndarray]:
    """Longest distance between 2-D points and its unit direction."""
    points = hull_vertices(unique_rows(points))
    differences = points[:, None, :] - points[None, :, :]
    distances = np.sqrt((differences**2).sum(-1))
    a, b = np.unravel_index(np.argmax(distances), distances.shape)
    return float(distances[a, b]), differences[b, a] / max(float(distances[a, b]), 1e-12)

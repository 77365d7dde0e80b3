"""A voxel array with its IJK->RAS geometry, and the explicit RAS<->LPS bridge to SimpleITK.

Operators work on plain numpy arrays so they can be tested without a scene. Arrays are indexed ``[k, j, i]``,
exactly as ``slicer.util.arrayFromVolume`` returns them, which is also SimpleITK's numpy order. Slicer world
coordinates are RAS; ITK's are LPS: the two differ by negating x and y, and every crossing is made here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import SimpleITK as sitk

LPS_FROM_RAS = np.diag([-1.0, -1.0, 1.0, 1.0])  # its own inverse


@dataclass
class ImageVolume:
    """``array[k, j, i]`` with ``ijk_to_ras`` mapping voxel (i, j, k, 1) to RAS mm (voxel centres)."""

    array: np.ndarray
    ijk_to_ras: np.ndarray
    metadata: dict = field(default_factory=dict)

    def __post_init__(self):
        self.ijk_to_ras = np.asarray(self.ijk_to_ras, dtype=float)
        if self.array.ndim != 3:
            raise ValueError(f"a volume must be 3-D, got shape {self.array.shape}")
        if self.ijk_to_ras.shape != (4, 4) or abs(np.linalg.det(self.ijk_to_ras[:3, :3])) < 1e-12:
            raise ValueError("ijk_to_ras must be an invertible 4x4 matrix")

    @property
    def shape_ijk(self) -> tuple[int, int, int]:
        k, j, i = self.array.shape
        return i, j, k

    @property
    def spacing(self) -> np.ndarray:
        """Voxel size along i, j, k in mm."""
        return np.linalg.norm(self.ijk_to_ras[:3, :3], axis=0)

    @property
    def voxel_volume_mm3(self) -> float:
        return float(abs(np.linalg.det(self.ijk_to_ras[:3, :3])))

    def ras_to_ijk(self, points_ras: np.ndarray) -> np.ndarray:
        """Continuous voxel coordinates (i, j, k) of RAS points, shape (N, 3)."""
        points = np.atleast_2d(np.asarray(points_ras, dtype=float))
        homogeneous = np.c_[points, np.ones(len(points))]
        return (np.linalg.inv(self.ijk_to_ras) @ homogeneous.T).T[:, :3]

    def ijk_to_ras_points(self, points_ijk: np.ndarray) -> np.ndarray:
        points = np.atleast_2d(np.asarray(points_ijk, dtype=float))
        homogeneous = np.c_[points, np.ones(len(points))]
        return (self.ijk_to_ras @ homogeneous.T).T[:, :3]

    def contains_ijk(self, points_ijk: np.ndarray) -> np.ndarray:
        """True for points inside the voxel lattice (half a voxel beyond the outer centres counts as inside)."""
        points = np.atleast_2d(points_ijk)
        upper = np.array(self.shape_ijk) - 0.5
        return np.all((points >= -0.5) & (points < upper), axis=1)

    def same_grid(self, other: ImageVolume, tolerance_mm: float = 1e-3) -> bool:
        return self.array.shape == other.array.shape and np.allclose(
            self.ijk_to_ras, other.ijk_to_ras, atol=tolerance_mm
        )


def to_sitk(volume: ImageVolume, dtype: type | None = np.float32) -> sitk.Image:
    """SimpleITK image in LPS with the same voxels (``dtype=None`` keeps the array's type)."""
    array = volume.array if dtype is None else volume.array.astype(dtype, copy=False)
    image = sitk.GetImageFromArray(np.ascontiguousarray(array))
    ijk_to_lps = LPS_FROM_RAS @ volume.ijk_to_ras
    spacing = np.linalg.norm(ijk_to_lps[:3, :3], axis=0)
    image.SetSpacing([float(value) for value in spacing])
    image.SetOrigin([float(value) for value in ijk_to_lps[:3, 3]])
    image.SetDirection([float(value) for value in (ijk_to_lps[:3, :3] / spacing).ravel()])
    return image


def from_sitk(image: sitk.Image, metadata: dict | None = None) -> ImageVolume:
    """Inverse of :func:`to_sitk`."""
    spacing = np.array(image.GetSpacing())
    ijk_to_lps = np.eye(4)
    ijk_to_lps[:3, :3] = np.array(image.GetDirection()).reshape(3, 3) * spacing
    ijk_to_lps[:3, 3] = image.GetOrigin()
    return ImageVolume(sitk.GetArrayFromImage(image), LPS_FROM_RAS @ ijk_to_lps, dict(metadata or {}))


def lps_to_ras_matrix(matrix_lps: np.ndarray) -> np.ndarray:
    """Express a 4x4 physical-space matrix given in LPS in RAS (conjugation by the axis flip)."""
    return LPS_FROM_RAS @ np.asarray(matrix_lps, dtype=float) @ LPS_FROM_RAS


ras_to_lps_matrix = lps_to_ras_matrix  # the flip is an involution: the same conjugation goes both ways

"""Coordinate conventions shared by rendering, actions and scoring.

- Views are the canonical names ``axial``, ``sagittal``, ``coronal``; their slice offsets are reported as the
  canonical RAS coordinate of the slice plane (axial = S, sagittal = R, coronal = A). Slicer's own offset for
  the radiological sagittal preset has the opposite sign (its normal points to patient left), so never expose
  the raw ``vtkMRMLSliceLogic.GetSliceOffset`` value.
- Screen points are 0..999 from the top-left of the rendered slice image; VTK's XY origin is bottom-left.
"""

from __future__ import annotations

import numpy as np

# VTK's own modules: ``import vtk`` loads all of VTK, about 0.5 s of CPU in each worker and test process
from vtkmodules.vtkCommonMath import vtkMatrix4x4

VIEWS = ("axial", "sagittal", "coronal")
CANONICAL_AXIS = {"axial": 2, "sagittal": 0, "coronal": 1}
AXIS_LETTER = {"axial": "S", "sagittal": "R", "coronal": "A"}


def vtk_to_numpy_matrix(matrix: vtkMatrix4x4) -> np.ndarray:
    return np.array([[matrix.GetElement(row, column) for column in range(4)] for row in range(4)])


def numpy_to_vtk_matrix(array: np.ndarray) -> vtkMatrix4x4:
    matrix = vtkMatrix4x4()
    for row in range(4):
        for column in range(4):
            matrix.SetElement(row, column, float(array[row, column]))
    return matrix


def ijk_to_ras(volume_node) -> np.ndarray:
    matrix = vtkMatrix4x4()
    volume_node.GetIJKToRASMatrix(matrix)
    return vtk_to_numpy_matrix(matrix)


def voxel_center_bounds(volume_node) -> np.ndarray:
    """(3, 2) array of min/max RAS over voxel centres: the extent within which a key slice hits the volume."""
    dims = volume_node.GetImageData().GetDimensions()
    corners = np.array([[i, j, k, 1.0] for i in (0, dims[0] - 1) for j in (0, dims[1] - 1) for k in (0, dims[2] - 1)])
    ras = corners @ ijk_to_ras(volume_node).T
    return np.stack([ras[:, :3].min(axis=0), ras[:, :3].max(axis=0)], axis=1)


def spacing_along(volume_node, axis: int) -> float:
    """Distance between consecutive voxel planes along a RAS axis (the natural scroll step)."""
    matrix = ijk_to_ras(volume_node)[:3, :3]
    column = int(np.argmax(np.abs(matrix[axis, :])))
    step = abs(matrix[axis, column])
    return float(step) if step > 1e-9 else float(np.linalg.norm(matrix[:, column]))


def lies_inside(volume_node, ras) -> bool:
    """Whether a RAS point lies within the volume's voxels (voxel-centre bounds widened by half a voxel): the one
    rule for "inside", so a point on a single-slice volume's plane, as printed to 3 decimals, is inside."""
    bounds = voxel_center_bounds(volume_node)
    margin = np.array([spacing_along(volume_node, axis) for axis in range(3)]) / 2.0
    point = np.asarray(ras, dtype=float)
    return bool(np.all(point >= bounds[:, 0] - margin) and np.all(point <= bounds[:, 1] + margin))


def screen_to_xy(point_1000: tuple[float, float], width: int, height: int) -> tuple[float, float]:
    """0..999 screen point (top-left origin) to VTK slice XY pixel coordinates (bottom-left origin)."""
    u = (float(point_1000[0]) + 0.5) * width / 1000.0
    v = (float(point_1000[1]) + 0.5) * height / 1000.0
    return u - 0.5, height - 0.5 - v


def xy_to_pixel(x: float, y: float, height: int) -> tuple[float, float]:
    """VTK XY to image column/row (top-left origin, pixel centres at integers)."""
    return x, height - 1.0 - y


def square_side(field_of_view) -> float:
    """Side (mm) of the square image a view is rendered as: its larger in-plane field of view."""
    return float(max(field_of_view[0], field_of_view[1]))


def bbox_center(bbox_1000: list[float]) -> tuple[float, float]:
    x0, y0, x1, y1 = bbox_1000
    return (x0 + x1) / 2.0, (y0 + y1) / 2.0

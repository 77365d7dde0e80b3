"""Registration and resampling: explicit RAS<->LPS handling and recovery of known synthetic transforms."""

from __future__ import annotations

import numpy as np
import pytest
from operator_phantoms import PHANTOM_BLOBS, phantom_volume, rotation_matrix

from MedOpenClawLib.operators.image import ImageVolume, from_sitk, lps_to_ras_matrix, to_sitk
from MedOpenClawLib.operators.registration import register, resample


def content_points() -> np.ndarray:
    """A lattice of points inside the phantom body, where the images carry information."""
    centre, axes, _ = PHANTOM_BLOBS[0]
    grid = np.stack(np.meshgrid(*[np.linspace(-1, 1, 7)] * 3, indexing="ij"), -1).reshape(-1, 3)
    grid = grid[(grid**2).sum(1) <= 1.0] * axes + centre
    return np.c_[grid, np.ones(len(grid))]


def max_error_mm(estimate: np.ndarray, truth: np.ndarray) -> float:
    points = content_points()
    return float(np.linalg.norm((points @ estimate.T - points @ truth.T)[:, :3], axis=1).max())


def rotation_error_degrees(estimate: np.ndarray, truth: np.ndarray) -> float:
    relative = estimate[:3, :3].T @ truth[:3, :3]
    return float(np.degrees(np.arccos(np.clip((np.trace(relative) - 1.0) / 2.0, -1.0, 1.0))))


def test_sitk_conversion_flips_x_and_y_and_round_trips():
    matrix = np.eye(4)
    matrix[:3, :3] = rotation_matrix((0, 0, 30)) @ np.diag([0.8, 1.2, 2.5])
    matrix[:3, 3] = (10.0, -20.0, 5.0)
    volume = ImageVolume(np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6), matrix)
    image = to_sitk(volume)
    ras = volume.ijk_to_ras_points([[2, 3, 1]])[0]
    assert np.allclose(image.TransformIndexToPhysicalPoint((2, 3, 1)), ras * [-1, -1, 1])
    assert image.GetPixel(2, 3, 1) == volume.array[1, 3, 2]
    back = from_sitk(image)
    assert np.allclose(back.ijk_to_ras, matrix) and np.array_equal(back.array, volume.array)
    translation_lps = np.eye(4)
    translation_lps[:3, 3] = (1.0, 2.0, 3.0)
    assert np.allclose(lps_to_ras_matrix(translation_lps)[:3, 3], (-1.0, -2.0, 3.0))


def test_rigid_registration_recovers_known_transform_within_1mm_and_1_degree():
    truth = np.eye(4)
    truth[:3, :3] = rotation_matrix((7.0, -5.0, 6.0))
    truth[:3, 3] = (4.0, -3.0, 2.5)
    fixed, moving = phantom_volume(), phantom_volume(moving_to_fixed=truth)
    result = register(fixed, moving, "rigid", "moments")
    assert max_error_mm(result.matrix_ras, truth) < 1.0
    assert rotation_error_degrees(result.matrix_ras, truth) < 1.0
    assert max_error_mm(np.eye(4), truth) > 5.0  # the test transform is not trivially small
    again = register(fixed, moving, "rigid", "moments")
    assert np.allclose(again.matrix_ras, result.matrix_ras)  # fixed seed: reproducible


def test_affine_registration_recovers_known_transform_within_2mm():
    truth = np.eye(4)
    truth[:3, :3] = rotation_matrix((5.0, 4.0, -6.0)) @ np.array([[1.08, 0.05, 0], [0, 0.95, 0.03], [0, 0, 1.04]])
    truth[:3, 3] = (3.0, 2.0, -2.0)
    result = register(phantom_volume(), phantom_volume(moving_to_fixed=truth), "affine", "moments")
    assert max_error_mm(result.matrix_ras, truth) < 2.0
    assert len(result.iterations) == 2  # a rigid stage, then the affine stage


def test_resampling_through_the_estimated_transform_overlays_the_fixed_volume():
    truth = np.eye(4)
    truth[:3, :3] = rotation_matrix((0.0, 0.0, 10.0))
    truth[:3, 3] = (5.0, 0.0, 0.0)
    fixed, moving = phantom_volume(), phantom_volume(moving_to_fixed=truth)
    aligned = resample(moving, fixed, truth)
    inside = fixed.array > 50
    before = np.abs(moving.array - fixed.array)[inside].mean()
    after = np.abs(aligned.array - fixed.array)[inside].mean()
    assert aligned.same_grid(fixed) and after < before / 4


def test_bad_registration_arguments_are_refused():
    volume = phantom_volume((16, 16, 16))
    with pytest.raises(ValueError, match="transform_type"):
        register(volume, volume, "bspline")
    with pytest.raises(ValueError, match="interpolation"):
        resample(volume, volume, np.eye(4), "cubic")

"""The fast interpolation stand-ins of the cohort generators give scipy's bytes, and the cropped interior reference
gives the whole volume's deepest voxel."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from MedOpenClawLib.bench.scoring.geometry import VoxelMask
from MedOpenClawLib.bench.synthetic import resampling
from MedOpenClawLib.bench.synthetic.resampling import cubic_zoom, linear_affine, linear_map


@pytest.mark.parametrize("shape", [(97, 115, 97), (120, 120, 78), (131, 104, 87), (5, 7, 3), (4, 9, 2)])
def test_cubic_zoom_is_scipy_zoom_bit_for_bit(shape):
    """The brain MNI and SRI24 grids at 2 mm, a LUMIERE scanner grid, and tiny grids whose every tap is an edge."""
    coarse = np.random.default_rng(sum(shape)).normal(0.0, 1.0, (4, 4, 4)).astype(np.float32)
    expected = ndimage.zoom(coarse, [size / 4 for size in shape], order=3)
    result = cubic_zoom(coarse, shape)
    assert result.dtype == expected.dtype == np.float32 and result.shape == expected.shape == shape
    assert np.array_equal(result.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("shape", [(23, 17, 11), (5, 7, 3)])
def test_cubic_zoom_sums_unsettled_voxels_as_scipy_does(shape, monkeypatch):
    """Every voxel left to scipy's own 64-term sum (an error bound no rounding can clear) still gives its bytes."""
    monkeypatch.setattr(resampling, "SUM_ERROR", 1.0)
    coarse = np.random.default_rng(len(shape)).normal(0.0, 1.0, (4, 4, 4)).astype(np.float32)
    expected = ndimage.zoom(coarse, [size / 4 for size in shape], order=3)
    assert np.array_equal(cubic_zoom(coarse, shape).view(np.uint32), expected.view(np.uint32))


def test_cubic_zoom_refuses_other_ranks():
    with pytest.raises(ValueError, match="3-D"):
        cubic_zoom(np.zeros((4, 4), dtype=np.float32), (8, 8))


def _head(shape: tuple[int, int, int], seed: int) -> list[np.ndarray]:
    """Two maps that are 0 outside a blob (as a brain is outside its head), one touching the volume's faces."""
    rng = np.random.default_rng(seed)
    blob = ndimage.gaussian_filter(rng.normal(size=shape), 3.0) > 0.05
    blob[-1] |= rng.random(shape[1:]) < 0.3
    return [(rng.random(shape) * blob).astype(np.float32), (rng.random(shape) * 900 * blob).round().astype(np.float32)]


def _assert_same_bits(results: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(results) == len(expected)
    for result, reference in zip(results, expected):
        assert result.dtype == reference.dtype == np.float32 and result.shape == reference.shape
        assert np.array_equal(result.view(np.uint32), reference.view(np.uint32))


@pytest.mark.parametrize("shape", [(50, 44, 40), (3, 2, 5)])
def test_linear_map_is_scipy_map_coordinates_bit_for_bit(shape):
    """The mass effect's warp (mode "nearest"): positions pushed around, beyond every face, and on the last voxel
    exactly (its second tap is clamped)."""
    arrays = _head(shape, sum(shape))
    rng = np.random.default_rng(len(shape))
    coordinates = np.indices(shape, dtype=np.float64) + rng.normal(0.0, 2.0, (3, *shape))
    coordinates[:, 0] = -3.7
    coordinates[:, -1] = np.array(shape, dtype=np.float64)[:, None, None] + 2.5
    coordinates[0, 1], coordinates[1, 2] = shape[0] - 1, shape[1] - 1
    expected = [ndimage.map_coordinates(array, coordinates, order=1, mode="nearest") for array in arrays]
    _assert_same_bits(linear_map(arrays, coordinates), expected)


@pytest.mark.parametrize("shape", [(50, 44, 40), (3, 2, 5)])
def test_linear_affine_is_scipy_affine_transform_bit_for_bit(shape):
    """A LUMIERE scanner grid (rotated, thicker slices, partly outside the atlas grid: 0 there) and exact shifts
    that land on the last voxel (its second tap is mirrored)."""
    arrays = _head(shape, sum(shape))
    rotation = np.array([[0.99, -0.1, 0.05], [0.1, 0.98, -0.08], [-0.04, 0.09, 0.99]]) * [1.0, 1.0, 1.5]
    for matrix, offset, size in ((rotation, np.array([-2.3, 1.7, -0.6]), (41, 47, 27)),
                                 (np.eye(3), np.array([1.0, 0.0, 2.0]), shape)):
        expected = [ndimage.affine_transform(array, matrix, offset, output_shape=size, order=1) for array in arrays]
        _assert_same_bits(linear_affine(arrays, matrix, offset, size), expected)


def test_linear_stand_ins_refuse_what_they_do_not_reproduce():
    with pytest.raises(ValueError, match="floating-point"):
        linear_map([np.zeros((4, 4, 4), dtype=np.int16)], np.zeros((3, 2, 2, 2)))
    with pytest.raises(ValueError, match="3x3"):
        linear_affine([np.zeros((4, 4, 4), dtype=np.float32)], np.eye(4), np.zeros(3), (2, 2, 2))


@pytest.mark.parametrize("seed", range(6))
def test_interior_reference_is_the_whole_volumes_deepest_voxel(seed):
    """Blobs anywhere, touching the volume's faces or not, with ties between equally deep voxels."""
    rng = np.random.default_rng(seed)
    data = ndimage.gaussian_filter(rng.normal(size=(40, 36, 30)), 2.5) > 0.12
    data[:, :, : int(rng.integers(0, 12))] = False
    affine = np.diag([0.8, 0.8, 2.5, 1.0])
    distance = ndimage.distance_transform_edt(np.pad(data, 1))[1:-1, 1:-1, 1:-1]
    deepest = np.unravel_index(int(np.argmax(distance)), data.shape)
    point, slices = VoxelMask(data, affine).interior_reference()
    assert point == [round(float(value), 4) for value in (affine @ np.array([*deepest, 1.0]))[:3]]
    assert data[deepest] and set(slices) == {"axial", "sagittal", "coronal"}

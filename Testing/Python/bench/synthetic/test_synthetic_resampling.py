"""The fast interpolation stand-ins of the cohort generators give scipy's bytes, and the cropped interior reference
gives the whole volume's deepest voxel."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from MedOpenClawLib.bench.scoring.geometry import VoxelMask
from MedOpenClawLib.bench.synthetic.resampling import cubic_zoom


@pytest.mark.parametrize("shape", [(97, 115, 97), (120, 120, 78), (131, 104, 87), (5, 7, 3), (4, 9, 2)])
def test_cubic_zoom_is_scipy_zoom_bit_for_bit(shape):
    """The brain MNI and SRI24 grids at 2 mm, a LUMIERE scanner grid, and tiny grids whose every tap is an edge."""
    coarse = np.random.default_rng(sum(shape)).normal(0.0, 1.0, (4, 4, 4)).astype(np.float32)
    expected = ndimage.zoom(coarse, [size / 4 for size in shape], order=3)
    result = cubic_zoom(coarse, shape)
    assert result.dtype == expected.dtype == np.float32 and result.shape == expected.shape == shape
    assert np.array_equal(result.view(np.uint32), expected.view(np.uint32))


def test_cubic_zoom_refuses_other_ranks():
    with pytest.raises(ValueError, match="3-D"):
        cubic_zoom(np.zeros((4, 4), dtype=np.float32), (8, 8))


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

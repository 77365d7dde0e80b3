"""The generators' shortcuts give what the plain numpy, scipy and pydicom calls they replace give, bit for bit: the
cohort's bytes must not depend on which of the two made them."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from MedOpenClawLib.bench.modules.nsclc.chest import Grid
from MedOpenClawLib.bench.modules.nsclc.synthetic import _series_datasets, save_series
from MedOpenClawLib.bench.synthetic.common import gaussian_filter
from MedOpenClawLib.bench.synthetic.tissue import GLASS, HALO, NOISE_LEVELS, _kept_with_noise, _noise_values


@pytest.mark.parametrize("shape, sigma", [
    ((96, 80, 3), (0.6, 0.6, 0)),  # a slide block's blur: the first axis summed by planes
    ((33, 64, 64), (0.5, 0.7, 0.7)),  # the CT's
    ((23, 17, 19), 1.5),  # a kernel too long for the plane sums: scipy's passes alone
    ((4, 50), (0.8, 0.3)),  # radius 3, with a first axis just longer
    ((3, 50), 0.8),  # ... and not longer: scipy's
    ((1, 9, 9), 0.5),
    ((41,), 0.4),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])  # float64 shows the double sums themselves
def test_gaussian_filter_is_scipys_bit_for_bit(shape, sigma, dtype):
    values = (np.random.default_rng(7).normal(size=shape) * 100).astype(dtype)
    expected = ndimage.gaussian_filter(values, sigma)
    found = gaussian_filter(values, sigma)
    assert found.dtype == expected.dtype and found.tobytes() == expected.tobytes()


def test_gaussian_filter_reads_a_view_and_leaves_its_input_alone():
    volume = np.random.default_rng(8).normal(size=(20, 32, 32)).astype(np.float32)
    box, before = volume[3:17, 5:30, 2:31], volume.copy()
    assert gaussian_filter(box, 1.5, truncate=4.0).tobytes() == ndimage.gaussian_filter(box, 1.5).tobytes()
    assert gaussian_filter(box, (0.5, 0.6, 0.0)).tobytes() == ndimage.gaussian_filter(box, (0.5, 0.6, 0.0)).tobytes()
    assert np.array_equal(volume, before)
    unblurred = gaussian_filter(volume, 0.0)
    assert np.array_equal(unblurred, volume) and not np.shares_memory(unblurred, volume)


@pytest.mark.parametrize("shape", [(6, 10, 3), (5, 7, 3), (6, 3, 3)])
def test_noise_values_are_the_table_of_every_byte(shape):
    draws = np.random.default_rng(9).integers(0, 256, (12, 14, 3), dtype=np.uint8)
    part = draws[1:1 + shape[0], 2:2 + shape[1]]  # a strided view, of odd and even sizes
    assert _noise_values(part).tobytes() == NOISE_LEVELS.take(part).tobytes()


@pytest.mark.parametrize("before", [0, 1, 2])  # draws before: an odd count leaves half a 64-bit draw unused
@pytest.mark.parametrize("high", [1, 7, 800, 1056, 65537, 2**31 - 1])  # block sides, and the widest int32
def test_32_bit_nucleus_positions_are_the_64_bit_draws(before, high):
    """A block's nucleus rows and columns drawn as int32: the same values, and the generator left where the
    int64 draws leave it (the nuclei and noise drawn after them stay the same)."""
    wide, narrow = np.random.default_rng(before * 31 + high), np.random.default_rng(before * 31 + high)
    wide.integers(0, 9, before), narrow.integers(0, 9, before)
    assert np.array_equal(wide.integers(0, high, 5001), narrow.integers(0, high, 5001, dtype=np.int32))
    assert wide.integers(0, 1000, 3).tolist() == narrow.integers(0, 1000, 3).tolist()
    assert wide.random() == narrow.random()


@pytest.mark.parametrize("top, bottom, left, right", [
    (0, 60, 0, 60),  # the whole block
    (10, 41, 5, 58),  # inside the kept part
    (0, 12, 3, 40),  # within the top halo only: all glass kept
    (50, 60, 0, 60),  # within the bottom halo only
    (14, 47, 44, 60),  # across the kept part's edge
])
def test_kept_block_is_noise_plus_colour_clipped_to_bytes(top, bottom, left, right):
    """The kept part of a block as the renderer built it before (every pixel's noise as a float, glass added
    outside the window, the window's colour inside, the whole clipped), here against the look-ups."""
    rng = np.random.default_rng(top * 100 + left)
    size = 60
    draws = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
    rgb = rng.uniform(-20, 275, (bottom - top, right - left, 3)).astype(np.float32)  # some clipped either way
    block = NOISE_LEVELS.take(draws)
    glass = np.ones((size, size), dtype=bool)
    glass[top:bottom, left:right] = False
    block[glass] += np.array(GLASS, dtype=np.float32)
    block[top:bottom, left:right] += rgb
    kept = block[HALO:size - HALO, HALO:size - HALO]
    expected = np.clip(kept, 0, 255).astype(np.uint8)
    crop = (slice(HALO, size - HALO), slice(HALO, size - HALO))
    assert _kept_with_noise(draws[crop], rgb, top - HALO, left - HALO).tobytes() == expected.tobytes()


@pytest.mark.parametrize("modality", ["CT", "PT"])
def test_series_files_are_the_bytes_pydicom_writes_each_slice_as(modality, tmp_path):
    subject = type("Subject", (), {"case_id": "R01-042"})()
    grid = Grid((-20.5, -21.25, -30.0), 1.3, 2.5, 6, 4)
    pixels = np.random.default_rng(10).integers(0, 3000, (4, 6, 6)).astype(np.int16 if modality == "CT" else np.uint16)
    arguments = (subject, grid, pixels, modality, "SERIES", 3, 0, "2.25.1", "2.25.2", 0.004, -2.0)
    (tmp_path / "saved").mkdir()
    (tmp_path / "series").mkdir()
    for index, ds in enumerate(_series_datasets(*arguments), 1):
        ds.save_as(tmp_path / "saved" / f"1-{index:03d}.dcm", enforce_file_format=True)
    save_series(_series_datasets(*arguments), tmp_path / "series")
    saved = sorted(path.name for path in (tmp_path / "saved").iterdir())
    assert sorted(path.name for path in (tmp_path / "series").iterdir()) == saved and len(saved) == 4
    for name in saved:
        assert (tmp_path / "series" / name).read_bytes() == (tmp_path / "saved" / name).read_bytes(), name

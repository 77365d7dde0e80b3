"""Pathology test fixtures: small generated pyramidal tiled TIFFs with known coloured regions.

Imported by the test_pathology_* modules (``from conftest_pathology import ...``); kept out of conftest.py,
which other areas own.
"""

from __future__ import annotations

import numpy as np
import pytest

from MedOpenClawLib.pathology.pyramid_tiff import write_pyramidal_tiff

SLIDE_SIZE = (6000, 4000)  # non-square, not a multiple of the tile size at coarser levels
DOWNSAMPLES = (1, 4, 16)
MPP = 0.25  # -> base magnification 40x
BACKGROUND = 235
# name -> (level-0 rectangle x0, y0, x1, y1, RGB)
REGIONS = {
    "red": ((1000, 600, 1400, 900), (200, 20, 20)),
    "blue": ((4200, 2500, 4700, 3100), (20, 20, 200)),
    "green": ((5000, 800, 5040, 840), (20, 180, 20)),
}


def paint_regions(downsample: float, x: int, y: int, width: int, height: int) -> np.ndarray:
    """Light textured background with the REGIONS rectangles, sampled at level-pixel centres."""
    xs = (np.arange(x, x + width) + 0.5) * downsample
    ys = (np.arange(y, y + height) + 0.5) * downsample
    texture = ((xs[None, :] // 200 + ys[:, None] // 200) % 2 * 8).astype(np.uint8)
    block = np.repeat((BACKGROUND - texture)[:, :, None], 3, axis=2)
    for (x0, y0, x1, y1), colour in REGIONS.values():
        inside = ((xs >= x0) & (xs < x1))[None, :] & ((ys >= y0) & (ys < y1))[:, None]
        block[inside] = colour
    return block


@pytest.fixture(scope="session")
def slide_root(tmp_path_factory):
    """A data root with two slides (the regions slide and a small plain one) and a non-slide .tif."""
    root = tmp_path_factory.mktemp("wsi_root")
    case = root / "case_regions"
    case.mkdir()
    write_pyramidal_tiff(case / "regions.tif", *SLIDE_SIZE, paint_regions, DOWNSAMPLES, tile=256, mpp=MPP)
    other = root / "case_plain"
    other.mkdir()
    write_pyramidal_tiff(
        other / "plain.tif", 1500, 1000, lambda ds, x, y, w, h: np.full((h, w, 3), 128, np.uint8), (1, 4), mpp=None
    )
    (root / "not_a_slide.tif").write_text("this is not a TIFF")
    return root


@pytest.fixture(scope="session")
def slide_path(slide_root):
    return str(slide_root / "case_regions" / "regions.tif")

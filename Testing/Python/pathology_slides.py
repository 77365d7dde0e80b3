"""The pathology test slide: a small generated pyramidal tiled TIFF with known coloured regions.

Its constants and painter are imported by the tests that check pixels (``from pathology_slides import REGIONS``);
the ``slide_root``/``slide_path`` fixtures that write it are in conftest.py.
"""

from __future__ import annotations

import numpy as np

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

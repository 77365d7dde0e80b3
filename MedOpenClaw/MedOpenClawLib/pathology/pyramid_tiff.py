"""Write generic tiled pyramidal TIFFs (one tiled page per level) that OpenSlide, tiffslide and Java ImageIO read.

Each level is painted directly at its own resolution by a caller-supplied function, so a 40k x 30k synthetic
slide is written in seconds without ever holding full-resolution pixels in memory. Pixel size goes into the
standard resolution tags (centimetre units), from which OpenSlide and tiffslide report ``mpp``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import numpy as np

# paint(downsample, x, y, width, height) -> uint8 RGB (height, width, 3) for that block of the level whose
# pixels are `downsample` full-resolution pixels wide; (x, y) is the block's origin in level pixels.
Painter = Callable[[float, int, int, int, int], np.ndarray]


def _tiles(paint: Painter, downsample: float, width: int, height: int, tile: int) -> Iterator[np.ndarray]:
    for y in range(0, height, tile):
        for x in range(0, width, tile):
            block = np.full((tile, tile, 3), 255, dtype=np.uint8)
            h, w = min(tile, height - y), min(tile, width - x)
            block[:h, :w] = paint(downsample, x, y, w, h)
            yield block


def write_pyramidal_tiff(
    path: str | os.PathLike,
    width: int,
    height: int,
    paint: Painter,
    downsamples: tuple[int, ...] = (1, 4, 16),
    tile: int = 256,
    mpp: float | None = 0.25,
    compression: str = "zlib",
) -> None:
    """Write levels at integer ``downsamples`` (level size = ceil(size / downsample)) as tiled RGB pages."""
    import tifffile

    if downsamples[0] != 1 or any(b <= a for a, b in zip(downsamples, downsamples[1:])):
        raise ValueError("downsamples must start at 1 and increase")
    with tifffile.TiffWriter(path, bigtiff=width * height * 3 > 2**31) as writer:
        for index, downsample in enumerate(downsamples):
            level_width, level_height = -(-width // downsample), -(-height // downsample)
            options = {}
            if mpp:
                per_cm = 1e4 / (mpp * downsample)
                options = {"resolution": (per_cm, per_cm), "resolutionunit": "CENTIMETER"}
            writer.write(
                _tiles(paint, float(downsample), level_width, level_height, tile),
                shape=(level_height, level_width, 3),
                dtype=np.uint8,
                tile=(tile, tile),
                photometric="rgb",
                compression=compression,
                subfiletype=0 if index == 0 else 1,
                metadata=None,
                **options,
            )

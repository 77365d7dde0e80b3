"""Pixel analysis for the non-privileged heuristic agent: it sees only what a model sees (the PNGs the tools
return), so everything here works on rendered screenshots, never on volumes or ground truth."""

from __future__ import annotations

import base64
import io
import math
import re
from dataclasses import dataclass

import numpy as np
from PIL import Image

from ...providers.messages import ImageInput

OVERLAY_ROWS = 0.1  # radiology tiles print the series name (top) and the slice offset (bottom): ignore those rows
MIN_BLOB_PX = 25  # smallest component (in 256-px tiles) counted as a lesion, about 5 mm across
MIN_LESION_CONTRAST = 40.0  # display levels between normal tissue (90th percentile) and a lesion's peak


def decode(image: ImageInput, mode: str = "L") -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(image.png_base64))).convert(mode), dtype=np.float32)


def split_montage(sheet: np.ndarray, count: int, tile: int = 256) -> np.ndarray:
    """The ``count`` tiles of a cine contact sheet (row-major, as the viewer tiles them) as one stack."""
    columns = sheet.shape[1] // tile
    tiles = [sheet[(i // columns) * tile:(i // columns + 1) * tile, (i % columns) * tile:(i % columns + 1) * tile]
             for i in range(count)]
    stack = np.stack(tiles)
    margin = int(tile * OVERLAY_ROWS)
    stack[:, :margin] = 0
    stack[:, -margin:] = 0
    return stack


def bright_threshold(stack: np.ndarray) -> float | None:
    """Halfway between the brightest normal tissue (90th percentile of non-background pixels) and the maximum:
    a lesion brighter than all normal tissue passes, normal tissue's noise tail does not."""
    tissue = stack[stack > 8]
    if tissue.size < 100:
        return None
    high, peak = float(np.percentile(tissue, 90)), float(tissue.max())
    if peak - high < MIN_LESION_CONTRAST:  # nothing stands out above normal tissue
        return None
    return high + 0.5 * (peak - high)


@dataclass
class Blob:
    """A 3D bright component across a stack of axial tiles."""

    voxels: int
    tile: int  # index of the tile where its cross-section is largest
    area: int  # that largest cross-section, px
    x_1000: float  # centroid of that cross-section in 0..999 screen coordinates
    y_1000: float
    x_px: float  # same centroid in tile pixels

    def diameter_mm(self, mm_per_px: float) -> float:
        return 2.0 * math.sqrt(self.area / math.pi) * mm_per_px


def bright_blobs(stack: np.ndarray, threshold: float | None = None) -> list[Blob]:
    """3D components above ``threshold`` (default :func:`bright_threshold`), largest first."""
    threshold = bright_threshold(stack) if threshold is None else threshold
    if threshold is None:
        return []
    from scipy import ndimage  # imported where pixels are measured: every importer of the agents would pay 0.3 s

    smooth = ndimage.uniform_filter(stack, size=(1, 3, 3))
    labels, count = ndimage.label(smooth > threshold)
    blobs = []
    for index, region in enumerate(ndimage.find_objects(labels), start=1):
        component = labels[region] == index
        if component.sum() < MIN_BLOB_PX:
            continue
        areas = component.sum(axis=(1, 2))
        best = int(np.argmax(areas))
        if areas[best] < MIN_BLOB_PX:
            continue
        rows, cols = np.nonzero(component[best])
        y, x = rows.mean() + region[1].start, cols.mean() + region[2].start
        size = stack.shape[1]
        blobs.append(Blob(int(component.sum()), best + region[0].start, int(areas[best]),
                          (x + 0.5) * 1000 / size - 0.5, (y + 0.5) * 1000 / size - 0.5, float(x)))
    return sorted(blobs, key=lambda blob: -blob.voxels)


def disk_contrast(image: np.ndarray, x_1000: float, y_1000: float, radius_px: float) -> float:
    """Brightest part (95th percentile) of a disk around a screen point minus the tissue's 95th percentile
    outside it, in display levels: > 0 means the spot is brighter than any normal tissue (e.g. enhancement)."""
    size = image.shape[0]
    yy, xx = np.mgrid[:size, :size]
    cx, cy = (x_1000 + 0.5) * size / 1000, (y_1000 + 0.5) * size / 1000
    disk = (xx - cx) ** 2 + (yy - cy) ** 2 <= max(radius_px, 2.0) ** 2
    margin = int(size * OVERLAY_ROWS)
    body = (image > 8) & ~disk
    body[:margin] = body[-margin:] = False
    if not disk.any() or not body.any():
        return 0.0
    return float(np.percentile(image[disk], 95) - np.percentile(image[body], 95))


# ------------------------------------------------------------------------------------------------ pathology
_OVERLAY = re.compile(r"x (\d+)\.\.(\d+), y (\d+)\.\.(\d+)")


def overlay_boxes(summary: str) -> list[tuple[int, int, int, int]]:
    """The non-tissue overlay rectangles (0..999) the GUI state summary lists."""
    line = next((line for line in summary.splitlines() if line.startswith("Overlays")), "")
    pad = 10  # panel borders and text strokes reach a little past the listed rectangles
    return [(max(int(x0) - pad, 0), max(int(y0) - pad, 0), int(x1) + pad, int(y1) + pad)
            for x0, x1, y0, y1 in _OVERLAY.findall(line)]


@dataclass
class DarkSpot:
    x_1000: float
    y_1000: float
    contrast: float  # darkness of the spot minus the tissue's median darkness
    area_fraction: float  # share of the screenshot darker than halfway between tissue median and the spot


def darkest_spot(rgb: np.ndarray, overlays: list[tuple[int, int, int, int]], window: int = 15) -> DarkSpot | None:
    """The densest (darkest, most haematoxylin-rich) tissue area of an H&E screenshot, outside the overlays."""
    darkness = 255.0 - rgb.mean(axis=2)
    height, width = darkness.shape
    valid = np.ones_like(darkness, dtype=bool)
    for x0, y0, x1, y1 in overlays:
        valid[int(y0 * height / 1000):int((y1 + 1) * height / 1000) + 1,
              int(x0 * width / 1000):int((x1 + 1) * width / 1000) + 1] = False
    tissue = valid & (darkness > 25)
    if tissue.sum() < 50:
        return None
    from scipy import ndimage  # as in bright_blobs

    smooth = ndimage.uniform_filter(np.where(tissue, darkness, 0.0), window)
    coverage = ndimage.uniform_filter(tissue.astype(np.float32), window)
    smooth = np.where(coverage > 0.9, smooth / np.maximum(coverage, 1e-6), 0.0)
    y, x = np.unravel_index(int(np.argmax(smooth)), smooth.shape)
    baseline = float(np.median(darkness[tissue]))
    peak = float(smooth[y, x])
    dense = tissue & (ndimage.uniform_filter(darkness, 5) > baseline + 0.5 * (peak - baseline))
    return DarkSpot(min(max((x + 0.5) * 1000 / width - 0.5, 0.0), 999.0),
                    min(max((y + 0.5) * 1000 / height - 0.5, 0.0), 999.0), peak - baseline,
                    float(dense.sum()) / float(height * width))

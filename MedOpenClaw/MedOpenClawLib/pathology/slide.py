"""Whole-slide image access: one pyramid level at a time, through an LRU cache of fixed-size tiles.

OpenSlide (``openslide-python`` + ``openslide-bin``) is the reader of choice; tiffslide is the fallback when
OpenSlide cannot be imported or cannot open the file. Rendering a field never decodes more than the tiles of
the one level it needs, and panning back and forth re-uses decoded tiles instead of re-reading the file.
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.result import ActionError

TILE_SIZE = 512
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024
BACKGROUND_RGB = (255, 255, 255)
# Largest single-level read a render may ask for (pixels); beyond it the slide lacks a coarse enough level.
MAX_READ_PIXELS = 64 * 1024 * 1024
# Largest unit (tile or strip) a reader may be made to decode at once: the file chooses its tile size, and one
# 16384^2 tile costs 1 GiB and tens of seconds per read. Real scanners write 240-1024 px tiles.
MAX_NATIVE_TILE_PIXELS = 2048 * 2048
MAX_TIFF_PAGES = 256  # pyramid levels, label, macro and thumbnail pages of a real slide number a dozen
# Convention when only the pixel size is known: 0.25 µm/px is a 40x scan (10 µm / mpp).
MICRONS_AT_1X = 10.0


@dataclass(frozen=True)
class SlideInfo:
    """Geometry and calibration of an opened slide, independent of the reading library."""

    path: str
    width: int
    height: int
    level_dimensions: tuple[tuple[int, int], ...]
    level_downsamples: tuple[float, ...]
    mpp: float | None
    base_magnification: float | None
    magnification_source: str  # "objective-power" | "mpp" | "none"
    backend: str

    @property
    def name(self) -> str:
        return Path(self.path).name

    def best_level(self, downsample: float) -> int:
        """The coarsest level that is still at least as fine as ``downsample`` (level 0 when zoomed in)."""
        best = 0
        for level, level_downsample in enumerate(self.level_downsamples):
            if level_downsample <= downsample * (1.0 + 1e-9):
                best = level
        return best

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "name": self.name,
            "width": self.width,
            "height": self.height,
            "levels": [
                {"width": w, "height": h, "downsample": round(ds, 6)}
                for (w, h), ds in zip(self.level_dimensions, self.level_downsamples)
            ],
            "mpp": self.mpp,
            "base_magnification": self.base_magnification,
            "magnification_source": self.magnification_source,
            "backend": self.backend,
        }


def _float_property(properties, *keys: str) -> float | None:
    for key in keys:
        value = properties.get(key)
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number) and number > 0:
            return number
    return None


def check_native_tiles(path: str) -> None:
    """Refuse a TIFF-family slide whose tiles (or strips) would decode to more than
    :data:`MAX_NATIVE_TILE_PIXELS` each, reading only its IFD headers (``tifffile``) before any reader decodes
    a pixel. Files that are not TIFF (MIRAX, VMS index files) are left to their readers; NDPI's one-JPEG levels
    are read by OpenSlide through restart markers, never whole, and are not checked."""
    try:
        import tifffile
    except ImportError:
        return
    try:
        handle = tifffile.TiffFile(path)
    except Exception:  # not a TIFF (or not one tifffile can parse): the backends decide
        return
    with handle:
        if handle.is_ndpi:
            return
        for index, page in enumerate(handle.pages):
            if index >= MAX_TIFF_PAGES:
                raise ActionError("slide_too_complex", f"{Path(path).name} holds more than {MAX_TIFF_PAGES} pages")
            if page is None or not hasattr(page, "imagewidth"):
                continue
            if page.is_tiled:
                width, height, unit = page.tilewidth, page.tilelength, "tile"
            else:
                width, height, unit = page.imagewidth, min(page.rowsperstrip or page.imagelength, page.imagelength), \
                    "strip"
            if width * height > MAX_NATIVE_TILE_PIXELS:
                raise ActionError("slide_tile_too_large", f"{Path(path).name}: page {index} is stored as {width}x"
                                  f"{height} px {unit}s, each decoded whole; at most {MAX_NATIVE_TILE_PIXELS} "
                                  "pixels per tile are read (re-save the slide tiled, e.g. 512 px tiles)")


def _open_backend(path: str):
    """Return (handle, backend name); OpenSlide first, tiffslide when OpenSlide is absent or refuses the file."""
    errors = []
    try:
        import openslide

        try:
            return openslide.OpenSlide(path), "openslide"
        except (openslide.OpenSlideError, OSError) as error:
            errors.append(f"openslide: {error}")
    except ImportError as error:
        errors.append(f"openslide unavailable: {error}")
    try:
        import tiffslide

        return tiffslide.TiffSlide(path), "tiffslide"
    except ImportError as error:
        errors.append(f"tiffslide unavailable: {error}")
    except Exception as error:  # tiffslide raises tifffile/zarr errors of many kinds for unreadable files
        errors.append(f"tiffslide: {type(error).__name__}: {error}")
    reasons = "; ".join(errors)
    raise ActionError("unreadable_image", f"cannot open {Path(path).name!r} as a whole-slide image ({reasons})")


class Slide:
    """An opened whole-slide image with a tile cache shared by every render of the session."""

    def __init__(self, path: str | os.PathLike, cache_bytes: int = DEFAULT_CACHE_BYTES):
        path = str(path)
        if not os.path.isfile(path):
            raise ActionError("not_found", f"no slide file at {path!r}")
        check_native_tiles(path)
        self._handle, backend = _open_backend(path)
        self._lock = threading.Lock()
        self._tiles: OrderedDict[tuple[int, int, int], np.ndarray] = OrderedDict()
        self._cache_bytes = cache_bytes
        self._cached = 0
        self.tile_reads = 0  # tiles decoded from the file (cache misses), for tests and benchmarks
        self.levels_read: set[int] = set()
        properties = self._handle.properties
        prefix = backend
        mpp_x = _float_property(properties, f"{prefix}.mpp-x")
        mpp_y = _float_property(properties, f"{prefix}.mpp-y")
        mpp = (mpp_x + mpp_y) / 2.0 if mpp_x and mpp_y else (mpp_x or mpp_y)
        objective = _float_property(properties, f"{prefix}.objective-power", "aperio.AppMag")
        if objective:
            base, source = objective, "objective-power"
        elif mpp:
            base, source = MICRONS_AT_1X / mpp, "mpp"
        else:
            base, source = None, "none"
        dimensions = tuple((int(w), int(h)) for w, h in self._handle.level_dimensions)
        self.info = SlideInfo(
            path=path,
            width=dimensions[0][0],
            height=dimensions[0][1],
            level_dimensions=dimensions,
            level_downsamples=tuple(float(ds) for ds in self._handle.level_downsamples),
            mpp=mpp,
            base_magnification=base,
            magnification_source=source,
            backend=backend,
        )

    def close(self) -> None:
        with self._lock:
            self._tiles.clear()
            self._cached = 0
            self._handle.close()

    def read_level(self, level: int, x: int, y: int, width: int, height: int) -> np.ndarray:
        """RGB pixels of ``level`` in level coordinates; the parts outside the slide are background."""
        if width * height > MAX_READ_PIXELS:
            raise ActionError(
                "slide_not_pyramidal",
                f"{self.info.name} has no pyramid level coarse enough for this field ({width}x{height} px read)",
            )
        level_width, level_height = self.info.level_dimensions[level]
        out = np.empty((height, width, 3), dtype=np.uint8)
        out[:] = BACKGROUND_RGB
        x_start, y_start = max(x, 0), max(y, 0)
        x_stop, y_stop = min(x + width, level_width), min(y + height, level_height)
        if x_start >= x_stop or y_start >= y_stop:
            return out
        for tile_y in range(y_start // TILE_SIZE, (y_stop - 1) // TILE_SIZE + 1):
            for tile_x in range(x_start // TILE_SIZE, (x_stop - 1) // TILE_SIZE + 1):
                tile = self._tile(level, tile_x, tile_y)
                tx0, ty0 = tile_x * TILE_SIZE, tile_y * TILE_SIZE
                ix0, iy0 = max(x_start, tx0), max(y_start, ty0)
                ix1, iy1 = min(x_stop, tx0 + tile.shape[1]), min(y_stop, ty0 + tile.shape[0])
                out[iy0 - y : iy1 - y, ix0 - x : ix1 - x] = tile[iy0 - ty0 : iy1 - ty0, ix0 - tx0 : ix1 - tx0]
        return out

    def thumbnail(self, max_size: int) -> np.ndarray:
        """Whole-slide RGB overview no larger than ``max_size`` on its long side, read from the coarsest level."""
        level = len(self.info.level_dimensions) - 1
        width, height = self.info.level_dimensions[level]
        pixels = self.read_level(level, 0, 0, width, height)
        from PIL import Image

        image = Image.fromarray(pixels)
        image.thumbnail((max_size, max_size), Image.Resampling.BILINEAR)
        return np.asarray(image)

    def _tile(self, level: int, tile_x: int, tile_y: int) -> np.ndarray:
        key = (level, tile_x, tile_y)
        with self._lock:
            tile = self._tiles.get(key)
            if tile is not None:
                self._tiles.move_to_end(key)
                return tile
            tile = self._decode_tile(level, tile_x, tile_y)
            self.tile_reads += 1
            self.levels_read.add(level)
            self._tiles[key] = tile
            self._cached += tile.nbytes
            while self._cached > self._cache_bytes and len(self._tiles) > 1:
                _, evicted = self._tiles.popitem(last=False)
                self._cached -= evicted.nbytes
            return tile

    def _decode_tile(self, level: int, tile_x: int, tile_y: int) -> np.ndarray:
        level_width, level_height = self.info.level_dimensions[level]
        x, y = tile_x * TILE_SIZE, tile_y * TILE_SIZE
        width, height = min(TILE_SIZE, level_width - x), min(TILE_SIZE, level_height - y)
        downsample = self.info.level_downsamples[level]
        # Readers take the origin in level-0 pixels and divide by the downsample again: round up so the
        # division lands on (not one pixel before) the tile's first level pixel.
        origin = (math.ceil(x * downsample - 1e-6), math.ceil(y * downsample - 1e-6))
        region = np.asarray(self._handle.read_region(origin, level, (width, height)))
        if region.shape[2] == 4 and not (region[..., 3] == 255).all():
            # OpenSlide marks areas without scanned data transparent: composite them onto the background
            alpha = region[..., 3:4].astype(np.float32) / 255.0
            rgb = region[..., :3].astype(np.float32) * alpha + np.array(BACKGROUND_RGB, np.float32) * (1 - alpha)
            return np.ascontiguousarray(np.rint(rgb).astype(np.uint8))
        return np.ascontiguousarray(region[..., :3])

"""H&E tissue rendered block by block from a scene of labelled polygons (micrometres), at any µm/px.

A scene is a list of :class:`Structure` (tissue class + polygon), painted in order into a per-pixel class map.
Each class has a background colour and a nucleus population (density per µm², size, elongation, stain), so
lymphoid tissue is dense small dark nuclei, a metastasis larger paler ones, fat a membrane lattice, stroma sparse
spindle nuclei. Nuclei are stamped per block from a per-block generator, so any block can be rendered alone and
the slide is byte-identical whatever the order or parallelism.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .common import gaussian_filter, rng_for

BLOCK = 1024  # px rendered at once (level 0)
HALO = 16  # px rendered beyond each block edge (more than a nucleus and the blur kernel), then cropped
GLASS = (242, 240, 243)


@dataclass(frozen=True)
class TissueClass:
    colour: tuple[int, int, int]  # cytoplasm / matrix
    density: float = 0.0  # nuclei per µm²
    radius_um: float = 3.0
    elongation: float = 1.0
    nucleus: tuple[int, int, int] = (70, 40, 120)
    jitter: float = 0.12  # per-nucleus stain variation (fraction)
    size_spread: float = 0.15  # per-nucleus size variation (fraction)


# Codes are painted in scene order; their look is the only thing the renderer knows about them.
CLASSES: dict[str, TissueClass] = {
    "glass": TissueClass(GLASS),
    "stroma": TissueClass((236, 170, 200), 1 / 2500, 2.8, 3.2, (95, 55, 130)),
    "loose_stroma": TissueClass((240, 200, 222), 1 / 1200, 2.8, 2.0, (100, 60, 140)),
    "desmoplasia": TissueClass((228, 190, 215), 1 / 900, 3.0, 2.5, (90, 55, 140)),
    "capsule": TissueClass((226, 150, 188), 1 / 3000, 2.6, 3.5, (90, 50, 125)),
    "fat": TissueClass((250, 246, 249), 1 / 20000, 3.0, 2.0, (110, 70, 140)),
    "lymphoid": TissueClass((214, 168, 204), 1 / 36, 2.7, 1.05, (52, 26, 100), 0.10, 0.10),
    "mantle": TissueClass((210, 160, 200), 1 / 34, 2.6, 1.05, (52, 26, 102), 0.10, 0.10),
    "germinal": TissueClass((224, 186, 214), 1 / 95, 3.6, 1.2, (105, 62, 145), 0.18, 0.25),
    "sinus": TissueClass((238, 214, 230), 1 / 700, 3.2, 1.3, (110, 70, 145), 0.2, 0.2),
    "histiocytes": TissueClass((228, 182, 212), 1 / 170, 3.8, 1.3, (120, 78, 152), 0.18, 0.2),
    "vessel": TissueClass((214, 80, 110), 1 / 900, 2.5, 2.5, (90, 50, 125)),
    "metastasis": TissueClass((212, 160, 200), 1 / 115, 4.8, 1.25, (98, 55, 140), 0.22, 0.3),
    "epithelium": TissueClass((222, 164, 206), 1 / 40, 3.2, 1.4, (74, 40, 124), 0.12, 0.15),
    "lumen": TissueClass((247, 238, 244)),
    "secretion": TissueClass((236, 205, 225)),
    "usual_hyperplasia": TissueClass((222, 170, 208), 1 / 60, 3.3, 1.6, (88, 50, 135), 0.25, 0.35),
    "atypical": TissueClass((220, 166, 206), 1 / 62, 3.6, 1.1, (80, 44, 130), 0.08, 0.08),
    "high_grade": TissueClass((216, 158, 202), 1 / 70, 4.6, 1.25, (72, 38, 124), 0.25, 0.35),
    "necrosis": TissueClass((232, 168, 198), 1 / 400, 1.6, 1.5, (70, 40, 110), 0.3, 0.4),
    "invasive": TissueClass((214, 156, 200), 1 / 58, 4.2, 1.3, (75, 40, 126), 0.22, 0.3),
}
CODES = {name: index for index, name in enumerate(CLASSES)}
PALETTE = np.array([look.colour for look in CLASSES.values()], dtype=np.float32)  # background colour per code
PIXEL = np.dtype((np.void, 3 * 4))  # one float32 RGB pixel as a single item
GLASS_PIXEL, UNIT_PIXEL = PALETTE[CODES["glass"]].view(PIXEL)[0], np.ones(3, dtype=np.float32).view(PIXEL)[0]
STROMAL = np.isin(np.arange(len(CLASSES)), [CODES["stroma"], CODES["capsule"], CODES["desmoplasia"]])  # fibres


@dataclass(frozen=True)
class Structure:
    """One labelled polygon of the scene, in µm (x right, y down)."""

    kind: str
    polygon: tuple[tuple[float, float], ...]

    @functools.cached_property
    def bounds(self) -> tuple[float, float, float, float]:
        xs, ys = zip(*self.polygon)
        return min(xs), min(ys), max(xs), max(ys)


def irregular_polygon(center, radius_x, radius_y, rng, points: int = 48, roughness: float = 0.15,
                      rotation: float | None = None) -> list[tuple[float, float]]:
    """A closed star-shaped polygon whose radius is a smooth random field over the angle (a few harmonics)."""
    angles = _angles(points)
    draws = np.array([(rng.normal(), rng.uniform(0, 2 * np.pi)) for _ in HARMONICS])  # (normal, phase) in turn
    # every harmonic's term at once, then added in turn (the same sums as one harmonic at a time; a scene draws
    # tens of thousands of polygons, and five rounds of small numpy calls each were a third of its CPU)
    terms = roughness * draws[:, 0, None] / HARMONICS[:, None] * np.cos(angles.harmonics + draws[:, 1, None])
    profile = np.ones(points)
    for term in terms:
        profile += term
    profile += 0.3 * roughness * rng.normal(size=points) / 3
    profile = np.clip(profile, 0.45, 1.6)
    theta = rng.uniform(0, np.pi) if rotation is None else rotation
    x = radius_x * profile * angles.cos
    y = radius_y * profile * angles.sin
    cos, sin = np.cos(theta), np.sin(theta)
    return list(zip((center[0] + cos * x - sin * y).tolist(), (center[1] + sin * x + cos * y).tolist()))


HARMONICS = np.arange(2, 7)  # of an irregular polygon's radius


@dataclass(frozen=True)
class _Angles:
    cos: np.ndarray
    sin: np.ndarray
    harmonics: np.ndarray  # (harmonic, angle): harmonic x angle


@functools.lru_cache(maxsize=32)
def _angles(points: int) -> _Angles:
    """``points`` angles evenly around the circle, as an irregular polygon uses them (a scene asks for the same
    few counts thousands of times)."""
    angles = np.linspace(0, 2 * np.pi, points, endpoint=False)
    found = _Angles(np.cos(angles), np.sin(angles), HARMONICS[:, None] * angles)
    for array in (found.cos, found.sin, found.harmonics):
        array.flags.writeable = False
    return found


def scaled(polygon, center, factor) -> list[tuple[float, float]]:
    return [(center[0] + (x - center[0]) * factor, center[1] + (y - center[1]) * factor) for x, y in polygon]


def max_diameter(polygon) -> float:
    """Largest vertex-to-vertex distance (the maximum Feret diameter of the polygon)."""
    points = np.asarray(polygon, dtype=float)
    return float(np.sqrt(((points[:, None, :] - points[None, :, :]) ** 2).sum(-1)).max())


# ------------------------------------------------------------------------------------------------ rendering
@functools.lru_cache(maxsize=8)
def _fat_membranes(mpp: float, period: int = 512) -> np.ndarray:
    """A toroidal adipocyte lattice (bool membrane map, ``period`` px square): Voronoi cell borders ~70 µm
    apart."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(1234)
    count = max(int((period * mpp / 70.0) ** 2), 4)
    seeds = rng.uniform(0, period, (count, 2))
    tiled = np.concatenate([seeds + [dx * period, dy * period] for dx in (-1, 0, 1) for dy in (-1, 0, 1)])
    yy, xx = np.mgrid[:period, :period]
    distances, _ = cKDTree(tiled).query(np.column_stack([yy.ravel(), xx.ravel()]), k=2)
    return ((distances[:, 1] - distances[:, 0]) < max(1.2 / mpp, 0.8)).reshape(period, period)


@functools.lru_cache(maxsize=64)
def _stamps(kind: str, mpp: float, count: int = 8) -> list[tuple[np.ndarray, np.ndarray]]:
    """Pixel offsets (dy, dx) of ``count`` elliptical nuclei of a class at ``mpp``, varied in size and angle."""
    look = CLASSES[kind]
    rng = np.random.default_rng(CODES[kind] * 7919 + 17)  # fixed per class: stamps are part of the look
    stamps = []
    for _ in range(count):
        radius = look.radius_um * (1 + look.size_spread * rng.normal()) / mpp
        radius = max(radius, 0.5)
        a, b = radius * np.sqrt(look.elongation), radius / np.sqrt(look.elongation)
        theta = rng.uniform(0, np.pi)
        extent = int(np.ceil(max(a, b))) + 1
        yy, xx = np.mgrid[-extent:extent + 1, -extent:extent + 1]
        u = xx * np.cos(theta) + yy * np.sin(theta)
        v = -xx * np.sin(theta) + yy * np.cos(theta)
        inside = (u / max(a, 0.5)) ** 2 + (v / max(b, 0.5)) ** 2 <= 1.0
        if not inside.any():
            inside[extent, extent] = True
        dy, dx = np.nonzero(inside)
        stamps.append((dy - extent, dx - extent))
    return stamps


@functools.lru_cache(maxsize=64)
def _reach(kind: str, mpp: float) -> int:
    """How far (px, either axis) a nucleus stamp of ``kind`` reaches from its centre at ``mpp``."""
    return max(int(max(np.abs(dy).max(), np.abs(dx).max())) for dy, dx in _stamps(kind, mpp))


# Sensor noise: a normal of 1.5 grey levels quantised to 256 equally likely values (its quantiles, +-4.3 levels at
# most), so one random byte per sample draws it: about 4x less CPU than a float32 normal (a 1,056 px block: 60 -> 16
# ms), which was nearly a third of a slide's rendering, and the same picture once the sum is rounded to 8 bits.
NOISE_LEVELS = np.array([NormalDist(0.0, 1.5).inv_cdf((level + 0.5) / 256) for level in range(256)], dtype=np.float32)


def _noise(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Sensor noise of ``shape`` (float32) from ``rng``."""
    return _noise_values(np.frombuffer(rng.bytes(math.prod(shape)), dtype=np.uint8).reshape(shape))


# Two noise levels per 16-bit index (the low byte's first, as the bytes lie in memory): one look-up per two samples,
# 40 % less CPU than one per byte (a take first widens its uint8 indices to 64 bits)
NOISE_PAIRS = np.stack(np.meshgrid(NOISE_LEVELS, NOISE_LEVELS), axis=-1).reshape(-1).view(np.float64)


def _noise_values(draws: np.ndarray) -> np.ndarray:
    """:data:`NOISE_LEVELS` of every byte of ``draws`` (uint8, any shape), as float32 of that shape."""
    flat = np.ascontiguousarray(draws).reshape(-1)
    if flat.size % 2:
        return NOISE_LEVELS.take(draws)
    return NOISE_PAIRS.take(flat.view("<u2")).view(np.float32).reshape(draws.shape)


# Bare glass plus its noise as 8 bits, per channel and byte drawn: glass pixels are looked up instead of added,
# clipped and converted as floats (the same float32 sums)
GLASS_NOISE = np.clip(NOISE_LEVELS + np.array(GLASS, dtype=np.float32)[:, None], 0, 255).astype(np.uint8)


class SlideScene:
    """A slide's structures and the per-slide stain field; ``render(x, y, w, h)`` gives level-0 RGB pixels."""

    def __init__(self, width: int, height: int, mpp: float, structures: list[Structure], seed_parts: tuple):
        self.width, self.height, self.mpp = width, height, mpp
        self.structures = structures
        self.seed_parts = seed_parts
        rng = rng_for(*seed_parts, "stain")
        # slide-wide stain variation: a coarse field (one value per 128 px) of haematoxylin/eosin intensity
        self.stain = rng.normal(0.0, 1.0, (3, height // 128 + 3, width // 128 + 3)).astype(np.float32)
        self.stain_gain = rng.uniform(0.93, 1.05, 3).astype(np.float32)  # per-slide staining batch
        self._glass_blocks: dict[tuple[int, int], np.ndarray] = {}

    # per structure, found once for the ~200 blocks, and only when a block is rendered (a scene's regions alone
    # do not need them): its bounds (µm, as x0, y0, x1, y1 columns) and its polygon in level-0 pixels
    @functools.cached_property
    def _bounds(self) -> np.ndarray:
        return np.array([structure.bounds for structure in self.structures], dtype=float).reshape(-1, 4).T

    @functools.cached_property
    def _polygons_px(self) -> list[np.ndarray]:
        return [np.array(structure.polygon, dtype=float) / self.mpp for structure in self.structures]

    def _glass(self, w: int, h: int) -> np.ndarray:
        """Bare glass: one noisy block per shape for the whole slide (most of a slide is glass; drawing its noise
        for every block was a third of the rendering time)."""
        if (w, h) not in self._glass_blocks:
            rgb = np.broadcast_to(np.array(GLASS, dtype=np.float32), (h, w, 3))
            noise = _noise(rng_for(*self.seed_parts, "glass"), (h, w, 3))
            self._glass_blocks[w, h] = np.clip(rgb + noise, 0, 255).astype(np.uint8)
        return self._glass_blocks[w, h]

    def _labels(self, x0: int, y0: int, w: int, h: int):
        """The block's class codes as an 8-bit image (PIL counts its codes and finds its tissue at once); None
        when no structure's box meets the block: bare glass, neither drawn nor counted (most of a slide)."""
        from PIL import Image, ImageDraw

        bx0, by0 = x0 * self.mpp, y0 * self.mpp
        bx1, by1 = (x0 + w) * self.mpp, (y0 + h) * self.mpp
        sx0, sy0, sx1, sy1 = self._bounds
        meeting = np.flatnonzero((sx1 >= bx0) & (sy1 >= by0) & (sx0 <= bx1) & (sy0 <= by1))  # scene order
        if not meeting.size:
            return None
        image = Image.new("L", (w, h), CODES["glass"])
        draw = ImageDraw.Draw(image)
        for index in meeting:
            draw.polygon((self._polygons_px[index] - (x0, y0)).tolist(), fill=CODES[self.structures[index].kind])
        return image

    def _stain_field(self, x0: int, y0: int, w: int, h: int) -> np.ndarray:
        from scipy import ndimage

        yy = (np.arange(h, dtype=np.float32) + y0) / 128.0
        xx = (np.arange(w, dtype=np.float32) + x0) / 128.0
        grid_y, grid_x = np.meshgrid(yy[::8], xx[::8], indexing="ij")  # one sample per 8x8 cell
        return np.stack([ndimage.map_coordinates(channel, [grid_y, grid_x], order=1, mode="nearest")
                         for channel in self.stain])

    def render(self, x0: int, y0: int, w: int, h: int) -> np.ndarray:
        """Level-0 uint8 RGB block (h, w, 3), rendered with a :data:`HALO` all round and cropped: nuclei across
        the block edge and the blur see their neighbourhood, so blocks meet without a seam."""
        return self._render(x0 - HALO, y0 - HALO, w + 2 * HALO, h + 2 * HALO)

    def _render(self, x0: int, y0: int, w: int, h: int) -> np.ndarray:
        """The block (x0, y0, w, h) without its :data:`HALO` (only what is kept is clipped and converted)."""
        crop = (slice(HALO, h - HALO), slice(HALO, w - HALO))
        image = self._labels(x0, y0, w, h)
        present = np.flatnonzero(image.histogram()[:len(CODES)]) if image is not None else None  # the codes, ascending
        if image is None or present.tolist() == [CODES["glass"]]:
            return self._glass(w, h)[crop]
        rng = rng_for(*self.seed_parts, "block", x0, y0)
        # only the tissue's box (and what a nucleus or the blur reaches beyond it) is painted; the rest of the
        # block is bare glass plus noise, as the whole-block rendering left it
        kinds = [list(CLASSES)[code] for code in present]
        reach = max([_reach(kind, self.mpp) for kind in kinds if CLASSES[kind].density > 0], default=0)
        reach = max(reach, 2) + 1  # a nucleus's pixels, and the 2 px the blur (sigma 0.6 px) reads
        box_left, box_top, box_right, box_bottom = image.getbbox()  # tissue's box (glass is code 0, PIL's "none")
        top, bottom = max(box_top - reach, 0), min(box_bottom + reach, h)
        left, right = max(box_left - reach, 0), min(box_right + reach, w)
        window = (slice(top, bottom), slice(left, right))
        block_labels = np.asarray(image)
        labels = block_labels[window]
        tissue = labels != CODES["glass"]
        glass = ~tissue
        window_rows, window_cols = np.arange(top, bottom), np.arange(left, right)
        rgb = PALETTE.take(labels, axis=0)  # take: a quarter of the time of PALETTE[labels], the same array
        # the stain shade per 8x8 cell of the block, then spread to the window's pixels (the same values as
        # spreading the field)
        coarse = 1.0 + 0.025 * self._stain_field(x0, y0, w, h).transpose(1, 2, 0)
        shade = coarse.take(window_rows // 8, axis=0).take(window_cols // 8, axis=1)
        # glass keeps its colour (x 1.0): a plain product, faster than a masked one (where=); set as whole pixels
        shade.view(PIXEL).reshape(glass.shape)[glass] = UNIT_PIXEL
        rgb *= shade
        if CODES["fat"] in present:
            lattice = _fat_membranes(self.mpp)
            period = lattice.shape[0]
            lattice_rows = (window_rows + y0) % period
            lattice_cols = (window_cols + x0) % period
            membrane = lattice.take(lattice_rows, axis=0).take(lattice_cols, axis=1) & (labels == CODES["fat"])
            rgb[membrane] = (226, 170, 200)
        fibres = rng.normal(0, 1, (h // 4 + 1, w // 4 + 1)).astype(np.float32)  # drawn even without stroma here:
        if STROMAL[present].any():  # the nuclei's draws come after it
            fibres = 9.0 * gaussian_filter(fibres, (0.6, 2.5))
            fibres = fibres.take(window_rows // 4, axis=0).take(window_cols // 4, axis=1)
            fibres *= STROMAL[labels]  # +-0 elsewhere leaves a colour as it is: half the time of a masked add
            rgb += np.repeat(fibres, 3).reshape(rgb.shape)  # broadcast (..., None) runs 3 values per inner loop
        # the window's pixels as whole RGB items (a view: rgb is a fresh C-ordered array), so nuclei are stamped
        # by one flat index each: 2.5x faster than setting (row, column) pairs of 3-channel pixels
        pixels = rgb.view(PIXEL).reshape(-1)
        for code in present:
            kind = list(CLASSES)[code]
            look = CLASSES[kind]
            if look.density <= 0:
                continue
            expected = look.density * w * h * self.mpp**2
            count = int(rng.poisson(expected))
            if count == 0:
                continue
            # drawn over the block, as 32-bit integers: the same values and draws as 64-bit ones (a range below
            # 2**32 is drawn 32 bits at a time either way) in half the memory, and their flat index below too
            rows, cols = rng.integers(0, h, count, dtype=np.int32), rng.integers(0, w, count, dtype=np.int32)
            # the class's pixels found by one flat take: coarse levels draw millions of nuclei per block (a
            # 1024 px slide: 13 million lymphocytes), and indexing twice by window bounds, then by 2-D label,
            # was most of their rendering
            flat = rows * w
            flat += cols
            keep = (block_labels == code).ravel().take(flat)
            cy, cx = rows[keep] - top, cols[keep] - left  # placed in the window (which holds all tissue)
            stamp_index = rng.integers(0, 8, cy.size)
            gain = np.clip(1.0 + look.jitter * rng.normal(size=cy.size), 0.55, 1.6).astype(np.float32)
            nucleus = np.array(look.nucleus, dtype=np.float32)
            for index, (dy, dx) in enumerate(_stamps(kind, self.mpp)):
                chosen = stamp_index == index
                if not chosen.any():
                    continue
                yy = (cy[chosen, None] + dy[None, :]).ravel()
                xx = (cx[chosen, None] + dx[None, :]).ravel()
                # a nucleus reaches less than `reach` px from its tissue centre: only the block's edge clips it
                inside = (yy >= 0) & (yy < bottom - top) & (xx >= 0) & (xx < right - left)
                at = yy * (right - left)
                at += xx
                colour = np.repeat((gain[chosen, None] * nucleus).view(PIXEL).ravel(), dy.size)
                pixels[at[inside]] = colour[inside]  # in stamp order: where nuclei overlap, the last one shows
        rgb = gaussian_filter(rgb, (0.6, 0.6, 0))
        # rows times the gain repeated along them: a (3,) operand broadcast over pixels ran 3 values per inner loop
        rgb.reshape(rgb.shape[0], -1)[...] *= np.tile(self.stain_gain, rgb.shape[1])
        rgb.view(PIXEL).reshape(glass.shape)[glass] = GLASS_PIXEL  # as whole pixels, like the shade's glass
        draws = np.frombuffer(rng.bytes(h * w * 3), dtype=np.uint8).reshape(h, w, 3)  # the block's noise
        return _kept_with_noise(draws[crop], rgb, top - HALO, left - HALO)


def _kept_with_noise(draws: np.ndarray, rgb: np.ndarray, top: int, left: int) -> np.ndarray:
    """The kept block as 8 bits: the float32 sum of its noise (``draws``, a byte per sample) and its colour, glass
    but in the window ``rgb`` whose corner is at (``top``, ``left``) of the kept block (outside it when negative),
    clipped to 0-255. Glass is looked up from the bytes (:data:`GLASS_NOISE`: the same sums); only the window's
    noise is drawn as floats."""
    height, width = draws.shape[:2]
    kept = np.empty(draws.shape, dtype=np.uint8)
    rows = slice(min(max(top, 0), height), min(max(top + rgb.shape[0], 0), height))
    cols = slice(min(max(left, 0), width), min(max(left + rgb.shape[1], 0), width))
    for outside in ((slice(0, rows.start), slice(None)), (slice(rows.stop, None), slice(None)),
                    (rows, slice(0, cols.start)), (rows, slice(cols.stop, None))):
        for channel in range(3):
            kept[outside + (channel,)] = GLASS_NOISE[channel].take(draws[outside + (channel,)])
    if rows.start < rows.stop and cols.start < cols.stop:
        inner = _noise_values(draws[rows, cols])
        inner += rgb[rows.start - top:rows.stop - top, cols.start - left:cols.stop - left]
        kept[rows, cols] = np.clip(inner, 0, 255, out=inner)
    return kept


def write_scene(path, scene: SlideScene, aperio: bool) -> None:
    """A tiled JPEG pyramid of ``scene`` (4x downsampled levels), rendered in strips of :data:`BLOCK` rows.

    Level 0 streams to the file tile row by tile row; the lower levels are box-averaged from each strip
    as it is rendered, so the whole level 0 is never held in memory.
    """

    def strips():
        for y in range(0, scene.height, BLOCK):
            h = min(BLOCK, scene.height - y)
            yield np.concatenate([scene.render(x, y, min(BLOCK, scene.width - x), h)
                                  for x in range(0, scene.width, BLOCK)], axis=1)

    write_strips(path, scene.width, scene.height, strips(), scene.mpp, aperio)


def write_strips(path, width: int, height: int, strips, mpp: float, aperio: bool, levels: int = 4,
                 tile: int = 256) -> None:
    """Write a pyramid from level-0 strips (each a multiple of ``tile`` rows but the last), JPEG Q80."""
    import tifffile
    from PIL import Image

    reduced: list[np.ndarray] = []

    def level0_tiles():
        for strip in strips:
            rows = strip.shape[0]
            reduced.append(np.asarray(Image.fromarray(strip).resize((max(width // 4, 1), max(rows // 4, 1)),
                                                                    Image.BOX)))
            for ty in range(0, rows, tile):
                for tx in range(0, width, tile):
                    part = strip[ty:ty + tile, tx:tx + tile]
                    if part.shape[:2] == (tile, tile):  # the writer copies it as it encodes it
                        yield part
                        continue
                    block = np.full((tile, tile, 3), 255, dtype=np.uint8)  # an edge tile: padded white
                    block[:part.shape[0], :part.shape[1]] = part
                    yield block

    description = None
    if aperio:
        description = (f"Aperio Image Library v12.0.15\r\n{width}x{height} [0,0 {width}x{height}] ({tile}x{tile}) "
                       f"JPEG/RGB Q=80|AppMag = {round(10.0 / mpp)}|MPP = {mpp}")
    per_cm = 10000.0 / mpp
    options = {"compression": "jpeg", "compressionargs": {"level": 80}, "photometric": "rgb",
               "tile": (tile, tile), "metadata": None, "resolutionunit": "CENTIMETER"}
    path.parent.mkdir(parents=True, exist_ok=True)
    with tifffile.TiffWriter(path) as writer:
        writer.write(level0_tiles(), shape=(height, width, 3), dtype=np.uint8, subfiletype=0,
                     description=description, resolution=(per_cm, per_cm), **options)
        level = np.concatenate(reduced, axis=0)[: max(height // 4, 1)]
        factor = 4
        for _ in range(1, levels):
            if min(level.shape[:2]) < tile // 2:
                break
            writer.write(level, subfiletype=1, resolution=(per_cm / factor, per_cm / factor), **options)
            factor *= 4
            level = np.asarray(Image.fromarray(level).resize((max(level.shape[1] // 4, 1),
                                                               max(level.shape[0] // 4, 1)), Image.BOX))

"""What every synthetic whole-slide image shares: the physical size of the glass (so µm/px follows the pixel size),
pyramid writing, polygons in level-0 pixels, and the layout that places non-overlapping tissue features."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .tissue import Structure, irregular_polygon, scaled, write_strips

SLIDE_WIDTH_UM = 24576.0  # physical width of every synthetic slide (µm); the height follows the aspect ratio


def slide_mpp(size: tuple[int, int]) -> float:
    return SLIDE_WIDTH_UM / size[0]


def write_pyramid(path: Path, image, mpp: float, aperio: bool, levels: int = 4) -> None:
    """A pyramid of one in-memory image (small fixtures); cohort slides stream through :func:`write_scene`."""
    write_strips(Path(path), image.size[0], image.size[1], [np.asarray(image.convert("RGB"))], mpp, aperio, levels)


def polygon_px(polygon, mpp: float) -> list[list[float]]:
    """A scene polygon (µm) as level-0 pixel coordinates, the way the annotation files store them."""
    return [[round(x / mpp, 1), round(y / mpp, 1)] for x, y in polygon]


def circle(center, radius, rng, roughness=0.05, points=28):
    return irregular_polygon(center, radius, radius * rng.uniform(0.85, 1.0), rng, points, roughness)


class SlideLayout:
    """Collects structures (µm) and places non-overlapping features inside a tissue outline."""

    def __init__(self, width_um: float, height_um: float, rng: np.random.Generator):
        self.width, self.height, self.rng = width_um, height_um, rng
        self.structures: list[Structure] = []
        self.taken: list[tuple[float, float, float]] = []

    def place(self, radii: tuple[float, float], pieces: list, tries: int = 80):
        """A centre anywhere on the glass for an elliptic piece of tissue with ``radii`` that keeps clear of the
        slide edge and of the ``pieces`` (centre, radii) already placed; None when none fits."""
        for _ in range(tries):
            center = (self.rng.uniform(radii[0] * 1.15, self.width - radii[0] * 1.15),
                      self.rng.uniform(radii[1] * 1.15, self.height - radii[1] * 1.15))
            if all(np.hypot((center[0] - c[0]) / (radii[0] + r[0]), (center[1] - c[1]) / (radii[1] + r[1])) > 0.75
                   for c, r in pieces):
                return center
        return None

    def clear_spot(self, center: tuple[float, float], reach: float, radius: float, placed: np.ndarray, gap: float,
                   tries: int) -> tuple[float, float] | None:
        """The first of ``tries`` points within ``reach`` of ``center`` (each drawn as an angle, then a radial
        fraction) where a circle of ``radius`` keeps ``gap`` from every (x, y, radius) row of ``placed``; None when
        none does. The tries are drawn and tested at once, and the generator then stands where drawing them one by
        one up to the first that fits leaves it (a lobule's acini tried thousands of points one by one: most of a
        breast-tissue scene's CPU)."""
        state = self.rng.bit_generator.state
        draws = self.rng.random(2 * tries)  # angle, radial fraction, angle, ...: as uniform(0, 2 pi), uniform(0, 1)
        angle, radial = 2 * np.pi * draws[0::2], np.sqrt(draws[1::2]) * reach
        xs, ys = center[0] + radial * np.cos(angle), center[1] + radial * np.sin(angle)
        x, y, q = placed.T
        clear = (np.hypot(xs[:, None] - x, ys[:, None] - y) > radius + q + gap).all(axis=1)
        first = int(clear.argmax()) if clear.any() else None
        self.rng.bit_generator.state = state
        self.rng.random(2 * (tries if first is None else first + 1))  # only the tries made are drawn
        return None if first is None else (xs[first], ys[first])

    def add(self, kind: str, polygon) -> list:
        self.structures.append(Structure(kind, tuple(polygon)))
        return polygon

    def spot(self, center, radii, clearance: float, fraction: float = 0.8, tries: int = 60):
        """A point inside the ellipse (center, radii * fraction) at least ``clearance`` from taken spots."""
        for _ in range(tries):
            angle, radial = self.rng.uniform(0, 2 * np.pi), np.sqrt(self.rng.uniform(0, 1)) * fraction
            point = (center[0] + radii[0] * radial * np.cos(angle), center[1] + radii[1] * radial * np.sin(angle))
            if all(np.hypot(point[0] - x, point[1] - y) >= clearance + r for x, y, r in self.taken):
                return point
        return point

    def duct(self, center, radius, wall: float, fill: str, epithelium: str = "epithelium") -> None:
        rng = self.rng
        outer = self.add(epithelium, circle(center, radius, rng))
        if radius - wall > 3:
            self.add(fill, scaled(outer, center, (radius - wall) / radius))


"""A digital thorax for the NSCLC cohort: anatomy, primary tumour and nodes as shapes in RAS millimetres,
rasterised on any axial grid into CT numbers (HU) and FDG uptake (SUV).

Anatomy: body contour with subcutaneous fat and muscle, ribs, spine with discs, sternum, heart, aorta,
pulmonary trunk, trachea and main bronchi, oesophagus, lungs above the diaphragm domes with a branching vessel
tree, liver, spleen, stomach and kidneys below. Lobes are split by the oblique and horizontal fissures, so a
tumour drawn "in the RML" is where the right middle lobe is. Tumours are lobulated, sometimes spiculated or
part-solid, sometimes against the pleura; their T stage is measured on the mask, not assumed. PET adds
physiological uptake (myocardium from barely visible to the brightest organ, liver, kidneys, stomach, marrow,
occasional brown fat), avid and non-avid nodes, partial-volume blur and count noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...synthetic.common import gaussian_filter


@dataclass(frozen=True)
class Grid:
    """An axial DICOM grid: LPS origin of the first voxel, pixel spacing (mm), slice spacing and counts."""

    origin_lps: tuple[float, float, float]
    spacing: float
    slice_spacing: float
    size: int
    slices: int

    def ras_points(self, region=(slice(None),) * 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """RAS coordinates of voxel centres of ``region`` ([slice, row, column] slices, like the frames)."""
        k, j, i = (np.arange(self.slices), np.arange(self.size), np.arange(self.size))
        k, j, i = k[region[0]], j[region[1]], i[region[2]]
        s = (self.origin_lps[2] + k * self.slice_spacing).astype(np.float32)[:, None, None]
        a = -(self.origin_lps[1] + j * self.spacing).astype(np.float32)[None, :, None]
        r = -(self.origin_lps[0] + i * self.spacing).astype(np.float32)[None, None, :]
        return r, a, s

    def region(self, low, high) -> tuple[slice, slice, slice] | None:
        """Index slices covering the RAS box [low, high] (None when it misses the grid)."""
        i0, i1 = (-high[0] - self.origin_lps[0]) / self.spacing, (-low[0] - self.origin_lps[0]) / self.spacing
        j0, j1 = (-high[1] - self.origin_lps[1]) / self.spacing, (-low[1] - self.origin_lps[1]) / self.spacing
        k0, k1 = (low[2] - self.origin_lps[2]) / self.slice_spacing, (high[2] - self.origin_lps[2]) / self.slice_spacing
        bounds = []
        for start, stop, count in ((k0, k1, self.slices), (j0, j1, self.size), (i0, i1, self.size)):
            start, stop = max(int(np.floor(start)), 0), min(int(np.ceil(stop)) + 1, count)
            if stop <= start:
                return None
            bounds.append(slice(start, stop))
        return tuple(bounds)


class Shape:
    """A solid in RAS mm: a bounding box and an inside test on coordinate arrays."""

    def box(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def inside(self, r, a, s) -> np.ndarray:
        raise NotImplementedError


@dataclass
class Ellipsoid(Shape):
    center: tuple[float, float, float]
    radii: tuple[float, float, float]
    shell: float = 0.0  # > 0: only the outer wall of this thickness

    def box(self):
        c, r = np.array(self.center), np.array(self.radii)
        return c - r, c + r

    def inside(self, r, a, s):
        c, q = self.center, self.radii
        d = ((r - c[0]) / q[0]) ** 2 + ((a - c[1]) / q[1]) ** 2 + ((s - c[2]) / q[2]) ** 2
        if self.shell <= 0:
            return d <= 1
        inner = [max(value - self.shell, 0.5) for value in q]
        e = ((r - c[0]) / inner[0]) ** 2 + ((a - c[1]) / inner[1]) ** 2 + ((s - c[2]) / inner[2]) ** 2
        return (d <= 1) & (e > 1)


@dataclass
class Capsule(Shape):
    """A segment with a radius tapering from ``r0`` to ``r1`` (vessels, bronchi, ribs)."""

    p0: tuple[float, float, float]
    p1: tuple[float, float, float]
    r0: float
    r1: float

    def box(self):
        p0, p1, r = np.array(self.p0), np.array(self.p1), max(self.r0, self.r1)
        return np.minimum(p0, p1) - r, np.maximum(p0, p1) + r

    def inside(self, r, a, s):
        p0, p1 = np.array(self.p0, dtype=np.float32), np.array(self.p1, dtype=np.float32)
        d = p1 - p0
        length2 = float(d @ d) or 1e-6
        t = np.clip(((r - p0[0]) * d[0] + (a - p0[1]) * d[1] + (s - p0[2]) * d[2]) / length2, 0, 1)
        distance2 = (r - p0[0] - t * d[0]) ** 2 + (a - p0[1] - t * d[1]) ** 2 + (s - p0[2] - t * d[2]) ** 2
        return distance2 <= (self.r0 + t * (self.r1 - self.r0)) ** 2


@dataclass
class Lobulated(Shape):
    """A tumour or node: a sphere whose radius varies smoothly with direction (lobulation), with optional
    spicules (thin tapering capsules from the surface)."""

    center: tuple[float, float, float]
    radius: float
    bumps: np.ndarray  # (k, 3) unit directions
    weights: np.ndarray  # (k,) radius change at each bump
    spicules: list[Capsule] = field(default_factory=list)
    scale: float = 1.0  # > 1 draws a halo around the solid part (ground glass)

    def box(self):
        reach = self.radius * self.scale * (1 + float(np.abs(self.weights).sum()))
        low, high = np.array(self.center) - reach, np.array(self.center) + reach
        for spicule in self.spicules:
            box = spicule.box()
            low, high = np.minimum(low, box[0]), np.maximum(high, box[1])
        return low, high

    def inside(self, r, a, s):
        dr, da, ds = r - self.center[0], a - self.center[1], s - self.center[2]
        distance = np.sqrt(dr**2 + da**2 + ds**2) + 1e-6
        profile = np.ones_like(distance)
        for (br, ba, bs), weight in zip(self.bumps, self.weights):
            cosine = (dr * br + da * ba + ds * bs) / distance
            profile = profile + weight * np.exp(4.0 * (cosine - 1.0))
        solid = distance <= self.radius * self.scale * profile
        for spicule in self.spicules:
            solid |= spicule.inside(r, a, s)
        return solid


def lobulated(center, radius, rng, roughness=0.35, spicules=0, scale=1.0) -> Lobulated:
    bumps = rng.normal(size=(8, 3))
    bumps /= np.linalg.norm(bumps, axis=1, keepdims=True)
    weights = roughness * rng.uniform(-0.5, 1.0, 8)
    spikes = []
    for direction in bumps[:spicules]:
        length = radius * rng.uniform(0.5, 1.3)
        start = np.array(center) + direction * radius * 0.8
        spikes.append(Capsule(tuple(start), tuple(start + direction * (length + radius * 0.3)), rng.uniform(0.8, 1.4),
                              0.3))
    return Lobulated(tuple(center), float(radius), bumps, weights, spikes, scale)


@dataclass
class Part:
    """One labelled piece of the scene: painted over ``over`` labels only (all when empty)."""

    name: str
    shape: Shape
    hu: float
    suv: float
    over: tuple[str, ...] = ()


# ------------------------------------------------------------------------------------------------ the subject
HEART = Ellipsoid((-22, 28, -62), (62, 50, 52))
LOBES = ("RUL", "RML", "RLL", "LUL", "LLL", "Lingula")
LUNG_TEXTURE_SIGMA = 1.5  # voxels: the parenchymal texture's blur
BLUR_TRUNCATE = 4.0  # the blur kernel's radius in sigmas (scipy's default, stated: the lung box's margin depends on it)


@dataclass
class Chest:
    """Body habitus and organ placement of one subject; all shapes are built from it."""

    rx: float  # body semi-axes (mm)
    ry: float
    fat: float  # subcutaneous fat thickness
    myocardium_suv: float
    brown_fat: bool
    parts: list[Part] = field(default_factory=list)

    @property
    def cavity(self) -> tuple[float, float]:
        return self.rx - self.fat - 22.0, self.ry - self.fat - 18.0

    def lungs(self, r, a, s) -> np.ndarray:
        """Inside either lung: inside the cavity, above the diaphragm domes, outside the mediastinum."""
        cx, cy = self.cavity
        in_cavity = (r / cx) ** 2 + ((a + 5) / cy) ** 2 <= 1
        dome = np.where(r > 0, -95.0, -115.0) + 0.0045 * ((np.abs(r) - 70) ** 2 + (a + 10) ** 2)
        apex = ((np.abs(r) - cx * 0.5) / (cx * 0.55)) ** 2 + ((a + 5) / cy) ** 2 + ((s - 30) / 140.0) ** 2 <= 1
        width = 30 + 0.22 * np.maximum(30 - s, 0)  # narrow upper mediastinum, wide at the heart
        mediastinum = ((r + 8 - 0.12 * a) / width) ** 2 + ((a - 8) / 70) ** 2 <= 1
        mediastinum |= (np.abs(r) < 26) & (a < -50)  # spine and paravertebral tissue
        return in_cavity & apex & (s > dome) & ~mediastinum & ~HEART.inside(r, a, s)

    @staticmethod
    def lobe(r, a, s) -> np.ndarray:
        """Lobe index into :data:`LOBES` by the fissures (oblique: posterior-superior to anterior-inferior)."""
        above_oblique = s > -40.0 - 0.95 * a
        right = r > 0
        upper = s > -25.0
        lobe = np.where(right, np.where(above_oblique, np.where(upper, 0, 1), 2),
                        np.where(above_oblique, np.where(upper | (a < 15), 3, 5), 4))
        return lobe


def build_chest(rng: np.random.Generator) -> Chest:
    chest = Chest(rx=float(rng.uniform(145, 178)), ry=float(rng.uniform(100, 128)), fat=float(rng.uniform(6, 30)),
                  myocardium_suv=float(np.exp(rng.uniform(np.log(1.4), np.log(14.0)))),
                  brown_fat=bool(rng.random() < 0.08))
    add = chest.parts.append
    cx, cy = chest.cavity
    z = (-400.0, 400.0)
    add(Part("fat", Ellipsoid((0, -5, 0), (chest.rx, chest.ry, 400)), -105, 0.35))
    add(Part("muscle", Ellipsoid((0, -5, 0), (chest.rx - chest.fat, chest.ry - chest.fat, 400)), 45, 0.7))
    add(Part("mediastinal_fat", Ellipsoid((0, -5, 0), (cx, cy, 400)), -70, 0.5))
    # abdomen below the domes (liver right, spleen and stomach left, kidneys)
    add(Part("liver", Ellipsoid((55, 0, -150), (cx * 0.95, cy * 0.92, 85)), 55, 2.2))
    add(Part("spleen", Ellipsoid((-cx * 0.6, -cy * 0.35, -130), (40, 32, 50)), 45, 1.9))
    add(Part("stomach", Ellipsoid((-cx * 0.35, cy * 0.25, -125), (48, 40, 40), shell=6), 40,
             float(rng.uniform(1.2, 3.0))))
    add(Part("stomach_air", Ellipsoid((-cx * 0.35, cy * 0.25, -112), (40, 33, 22)), -950, 0.05, ("stomach",)))
    for side in (1, -1):
        kidney = Ellipsoid((side * 62, -cy * 0.55, -250 + 12 * side), (28, 22, 55))
        add(Part("kidney", kidney, 35, 3.0))
        add(Part("renal_pelvis", Ellipsoid((side * 52, -cy * 0.5, -250 + 12 * side), (10, 8, 25)), 10,
                 float(rng.uniform(8, 30)), ("kidney",)))
    chest.lung_part = Part("lung", _Region(chest.lungs, (np.array([-cx, -cy - 5, -130.0]),
                                                           np.array([cx, cy, 175.0]))), -860, 0.4)
    add(chest.lung_part)
    # mediastinum
    add(Part("heart", HEART, 40, 1.8))
    add(Part("myocardium", Ellipsoid((-30, 26, -70), (52, 42, 44), shell=11), 42, chest.myocardium_suv, ("heart",)))
    aorta = [(14, 25, -25), (14, 22, 35), (5, 5, 62), (-12, -20, 60), (-22, -42, 40), (-22, -45, -40),
             (-18, -45, -130), (-10, -45, -300)]
    for p0, p1 in zip(aorta, aorta[1:]):
        add(Part("aorta", Capsule(p0, p1, 14, 12), 42, 1.7))
    add(Part("pulmonary_trunk", Capsule((-8, 40, -25), (-4, 18, 12), 14, 13), 42, 1.7))
    for side in (1, -1):
        add(Part("pulmonary_artery", Capsule((-4, 18, 12), (side * 48, 0, 5), 11, 9), 42, 1.7))
    add(Part("svc", Capsule((28, 18, -25), (26, 10, 110), 10, 10), 42, 1.7))
    add(Part("oesophagus", Capsule((-6, -30, 160), (-14, -30, -110), 8, 8), 40, float(rng.uniform(1.2, 2.5))))
    add(Part("trachea", Capsule((0, -5, 200), (0, -10, 28), 10, 10), 40, 0.6))
    add(Part("airway", Capsule((0, -5, 200), (0, -10, 28), 8, 8), -990, 0.05, ("trachea",)))
    for side in (1, -1):
        bronchus = Capsule((0, -10, 28), (side * 50, -8, 5), 7, 5.5)
        add(Part("bronchus", bronchus, 40, 0.6))
        add(Part("airway", Capsule((0, -10, 28), (side * 50, -8, 5), 5.5, 4), -990, 0.05, ("bronchus",)))
    # vessel tree: from each hilum towards the periphery, only inside the lungs
    for side in (1, -1):
        for target in ((side * cx * 0.5, -10, 90), (side * cx * 0.6, 25, -40), (side * cx * 0.55, -40, -60)):
            _branch(chest, (side * 48.0, -2.0, 5.0), np.array(target) - (side * 48.0, -2.0, 5.0), 6.5, 0, rng)
    # skeleton
    for k in range(-14, 14):
        top, bottom = 30.0 * k + 4, 30.0 * k + 28
        add(Part("spine", Capsule((0, -cy + 8, top), (0, -cy + 8, bottom), 17, 17), 230, 1.6))
        add(Part("cortex", Ellipsoid((0, -cy + 8, (top + bottom) / 2), (18, 18, 12), shell=2.0), 650, 1.6))
    add(Part("spinous", Capsule((0, -cy - 18, z[0]), (0, -cy - 18, z[1]), 6, 6), 450, 1.0))
    add(Part("canal", Capsule((0, -cy - 4, z[0]), (0, -cy - 4, z[1]), 7, 7), 30, 0.5, ("muscle", "spinous")))
    add(Part("sternum", Capsule((0, cy + 6, 95), (0, cy + 10, -85), 9, 8), 400, 1.2))
    for level in range(11):
        s_back = 160.0 - 26.0 * level
        for side in (1, -1):
            points = []
            for theta in np.linspace(-100, 75, 24):
                t = np.radians(theta)
                points.append((side * (cx + 9) * np.cos(t), -5 + (cy + 9) * np.sin(t),
                               s_back - 35.0 * (theta + 100) / 175))
            for p0, p1 in zip(points, points[1:]):
                add(Part("rib", Capsule(p0, p1, 5.0, 5.0), 480, 1.0, ("muscle", "fat", "mediastinal_fat", "lung")))
    if chest.brown_fat:
        for side in (1, -1):
            add(Part("brown_fat", Ellipsoid((side * 55, -20, 150), (22, 18, 25)), -90, float(rng.uniform(3, 9)),
                     ("fat", "muscle", "mediastinal_fat")))
            add(Part("brown_fat", Capsule((side * 28, -cy + 5, 120), (side * 28, -cy + 5, 0), 6, 6), -90,
                     float(rng.uniform(2.5, 7)), ("mediastinal_fat", "muscle")))
    return chest


@dataclass
class _Region(Shape):
    test: object
    bounds: tuple

    def box(self):
        return self.bounds

    def inside(self, r, a, s):
        return self.test(r, a, s)


def _branch(chest: Chest, start, direction, radius, depth, rng) -> None:
    length = float(np.linalg.norm(direction)) * (0.55 if depth == 0 else 1.0)
    unit = direction / (np.linalg.norm(direction) + 1e-6)
    end = np.array(start) + unit * length
    chest.parts.append(Part("vessel", Capsule(tuple(start), tuple(end), radius, radius * 0.85), 40, 0.9, ("lung",)))
    if depth >= 5 or radius < 1.0:
        return
    for sign in (1, -1):
        turn = rng.normal(size=3)
        turn -= unit * (turn @ unit)
        turn /= np.linalg.norm(turn) + 1e-6
        child = unit * np.cos(0.5) + sign * turn * np.sin(0.5) * rng.uniform(0.6, 1.2)
        _branch(chest, end, child * length * rng.uniform(0.65, 0.85), radius * rng.uniform(0.62, 0.75), depth + 1,
                rng)


def label_volume(parts: list[Part], grid: Grid) -> np.ndarray:
    """Index into ``parts`` (+1; 0 = air outside the body) for every voxel of ``grid``."""
    labels = np.zeros((grid.slices, grid.size, grid.size), dtype=np.uint16)
    names = np.array(["", *(part.name for part in parts)])  # by label: 0 is air
    allowed_by_over = {}  # per ``over`` tuple, whether each label may be painted over (a thorax has ~2000 parts)
    for index, part in enumerate(parts, 1):
        region = grid.region(*part.shape.box())
        if region is None:
            continue
        inside = part.shape.inside(*grid.ras_points(region))
        if part.over:
            if part.over not in allowed_by_over:
                allowed_by_over[part.over] = np.isin(names, part.over) & (np.arange(names.size) > 0)
            inside &= allowed_by_over[part.over][labels[region]]
        labels[region][inside] = index
    return labels


def ct_numbers(parts: list[Part], labels: np.ndarray, grid: Grid, rng: np.random.Generator) -> np.ndarray:
    """HU (float32): label values, a dependent-lung gradient, smooth parenchymal texture and scanner noise."""
    from scipy import ndimage

    table = np.array([-1000.0] + [part.hu for part in parts], dtype=np.float32)
    hu = table[labels]
    lung = np.isin(labels, [i for i, part in enumerate(parts, 1) if part.name == "lung"])
    _, a, _ = grid.ras_points()
    noise = rng.normal(0, 1, labels.shape).astype(np.float32)
    box = next(iter(ndimage.find_objects(lung.view(np.uint8))), None)
    if box is not None:  # the texture is only added in the lung: blurred in its box (a quarter of the grid)
        reach = int(BLUR_TRUNCATE * LUNG_TEXTURE_SIGMA + 0.5)  # and the kernel's radius, so the box's values are equal
        around = tuple(slice(max(side.start - reach, 0), min(side.stop + reach, size))
                       for side, size in zip(box, labels.shape))
        inner = tuple(slice(side.start - outer.start, side.stop - outer.start) for side, outer in zip(box, around))
        texture = gaussian_filter(noise[around], LUNG_TEXTURE_SIGMA, truncate=BLUR_TRUNCATE)[inner] * 40
        hu[box] += np.where(lung[box], texture - 0.5 * (a[:, box[1]] + 20), 0)
    hu = gaussian_filter(hu, (0.5, 0.7, 0.7))
    return hu + rng.normal(0, 14, hu.shape).astype(np.float32)


def suv_volume(parts: list[Part], grid: Grid, rng: np.random.Generator) -> np.ndarray:
    """SUV on ``grid`` (2 mm working voxels are averaged down to it): uptake, ~6.5 mm FWHM blur, count noise."""
    from scipy import ndimage

    fine = Grid(grid.origin_lps, grid.spacing / 2, grid.slice_spacing / 2, grid.size * 2, grid.slices * 2)
    labels = label_volume(parts, fine)
    table = np.array([0.0] + [part.suv for part in parts], dtype=np.float32)
    suv = table[labels]
    sigma = 6.5 / 2.355 / np.array([fine.slice_spacing, fine.spacing, fine.spacing])
    suv = ndimage.gaussian_filter(suv, sigma)
    suv = suv.reshape(grid.slices, 2, grid.size, 2, grid.size, 2).mean(axis=(1, 3, 5))
    noise = rng.normal(0, 1, suv.shape).astype(np.float32) * 0.12 * np.sqrt(np.maximum(suv, 0.05) * 1.5)
    return np.clip(suv + noise, 0, None)

"""Synthetic brain MRI on the MNI152 2009 template shipped with nilearn (T1 image and GM/WM probability maps).

World coordinates are MNI millimetres throughout. Studies are written on the SRI24 atlas grid of the BraTS-style
datasets (:func:`sri24_template`) or resampled onto per-study scanner grids (:func:`native_study`).

Tissue intensities per sequence are mixed from the template's tissue maps. Tumours are compartments
(enhancing rim, necrosis, oedema, solid non-enhancing tumour, cyst, calcification...) whose outlines are
ellipsoids perturbed by a smooth random field, so rims are irregular and cores eccentric; oedema reaches
further along white matter and spares CSF; a mass pushes the surrounding anatomy away through a smooth
deformation. Each study gets a multiplicative bias field and Rician noise. Class signatures are probabilities
(an IDH-mutant astrocytoma may enhance, a glioblastoma may barely), not rules.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .resampling import cubic_zoom, linear_affine, linear_map

SEQUENCES = ("T1", "T1c", "T2", "FLAIR")
TISSUE_SIGNAL = {  # (white matter, grey matter, CSF) per sequence, arbitrary units 0..1
    "T1": (0.85, 0.55, 0.20),
    "T1c": (0.85, 0.55, 0.20),
    "T2": (0.35, 0.55, 0.95),
    "FLAIR": (0.45, 0.60, 0.10),
}
COMPARTMENT_SIGNAL = {  # T1, T1c, T2, FLAIR
    "edema": (0.45, 0.45, 0.80, 0.92),
    "mismatch": (0.38, 0.40, 0.95, 0.55),  # T2-FLAIR mismatch: T2-bright, FLAIR-suppressed core
    "calcification": (0.30, 0.30, 0.15, 0.20),
    "cavity": (0.12, 0.12, 1.00, 0.12),
    "solid": (0.40, 0.42, 0.85, 0.85),
    "bubbly": (0.30, 0.30, 1.00, 0.40),
    "cyst": (0.15, 0.15, 1.00, 0.15),
    "necrosis": (0.25, 0.25, 0.90, 0.50),
    "enhancing": (0.50, 1.00, 0.60, 0.70),
    "enhancing_mild": (0.45, 0.78, 0.70, 0.75),
    # findings that are not tumour (never part of a tumour mask)
    "wmh": (0.42, 0.42, 0.82, 0.86),  # age-related white-matter hyperintensity (small-vessel disease)
    "gliosis": (0.45, 0.45, 0.72, 0.78),  # treated brain around a cavity: FLAIR-bright, stable over time
    "postop_lining": (0.50, 0.95, 0.75, 0.80),  # thin, smooth enhancement lining a resection cavity
    "blood": (0.95, 0.95, 0.45, 0.80),  # methaemoglobin: as bright on T1 as on T1c
    "choroid_plexus": (0.50, 1.00, 0.65, 0.55),  # normal anatomy, as bright as tumour on every post-contrast T1
}
PAINT_ORDER = ("wmh", "gliosis", "edema", "solid", "mismatch", "bubbly", "cyst", "cavity", "postop_lining", "blood",
               "choroid_plexus", "necrosis", "enhancing_mild", "enhancing", "calcification")


def nilearn_data_dir() -> Path:
    """nilearn's packaged template directory, located without importing nilearn.datasets (slow, ~5 s)."""
    spec = importlib.util.find_spec("nilearn")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the synthetic brain cohort needs nilearn (pip install nilearn)")
    return Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data"


@dataclass(frozen=True)
class Template:
    t1: np.ndarray  # 0..1
    gm: np.ndarray
    wm: np.ndarray
    csf: np.ndarray
    head: np.ndarray  # bool
    affine: np.ndarray

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.t1.shape

    @functools.cached_property
    def white_matter_sites(self) -> tuple[np.ndarray, np.ndarray]:
        """(voxels deep in white matter, white-matter voxels against the ventricles): where small-vessel disease
        sits; found once per template, not once per subject."""
        from scipy import ndimage

        deep = np.argwhere(self.wm > 0.9)
        periventricular = np.argwhere((self.wm > 0.6) & ndimage.binary_dilation(self.csf > 0.9, iterations=2))
        return deep, periventricular

    @functools.cached_property
    def brain(self) -> np.ndarray:
        """The brain without skull and scalp (grey and white matter, the CSF they enclose): what a skull-strip
        keeps."""
        from scipy import ndimage

        tissue = ndimage.binary_closing(self.gm + self.wm > 0.25, iterations=2)
        return ndimage.binary_fill_holes(tissue) & self.head

    def ras_grid(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """World R, A and S of the voxel centres (the grid is axis-aligned), as axes that broadcast to the grid:
        shapes (n0, 1, 1), (1, n1, 1), (1, 1, n2)."""
        i, j, k = _voxel_axes(self.shape)
        a = self.affine
        return a[0, 0] * i + a[0, 3], a[1, 1] * j + a[1, 3], a[2, 2] * k + a[2, 3]


def _voxel_axes(shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.indices(shape, dtype=np.float32)`` as three axes that broadcast to ``shape`` (same values, no copies)."""
    return tuple(np.arange(size, dtype=np.float32).reshape([size if axis == dim else 1 for axis in range(3)])
                 for dim, size in enumerate(shape))


def _block_mean(data: np.ndarray, factor: int) -> np.ndarray:
    shape = [size // factor for size in data.shape]
    cropped = data[: shape[0] * factor, : shape[1] * factor, : shape[2] * factor]
    return cropped.reshape(shape[0], factor, shape[1], factor, shape[2], factor).mean(axis=(1, 3, 5))


def _tissue_template(t1: np.ndarray, gm: np.ndarray, wm: np.ndarray, affine: np.ndarray) -> Template:
    """A template from its T1 and grey/white maps: the head is where the T1 has signal, CSF what remains."""
    head = t1 > 0.05
    csf = np.clip(head.astype(np.float32) - gm - wm, 0, 1)
    return Template(t1, gm, wm, csf, head, affine)


@functools.lru_cache(maxsize=4)
def load_template(spacing_mm: int) -> Template:
    """The MNI152 template at an integer voxel size (block-averaged from 1 mm), with tissue maps."""
    import nibabel as nib

    if int(spacing_mm) != spacing_mm or spacing_mm < 1:
        raise ValueError("the brain voxel size must be a whole number of millimetres (1, 2, 3...)")
    factor = int(spacing_mm)
    directory = nilearn_data_dir()
    images = {
        name: nib.load(directory / f"mni_icbm152_{name}_tal_nlin_sym_09a_converted.nii.gz")
        for name in ("t1", "gm", "wm")
    }
    arrays = {
        name: _block_mean(np.asarray(image.dataobj, dtype=np.float32) / 255.0, factor) for name, image in images.items()
    }
    scale = np.diag([factor, factor, factor, 1.0])
    scale[:3, 3] = (factor - 1) / 2.0
    return _tissue_template(arrays["t1"], arrays["gm"], arrays["wm"], images["t1"].affine @ scale)


def resample_template(template: Template, shape: tuple[int, int, int], affine: np.ndarray) -> Template:
    """The template's tissue maps on another axis-aligned grid (trilinear, empty outside the template); world
    coordinates are kept, so compartments defined in MNI millimetres stay where they were."""
    to_source = np.round(np.linalg.inv(template.affine) @ affine, 9)  # exact shifts stay exact (no blur)
    maps = linear_affine([template.t1, template.gm, template.wm], to_source[:3, :3], to_source[:3, 3], shape)
    return _tissue_template(*maps, affine)


SRI24_FIELD_MM = (240.0, 240.0, 155.0)  # the SRI24 atlas grid of BraTS-style datasets: 240x240x155 at 1 mm
SRI24_AXIS_SIGNS = (-1.0, -1.0, 1.0)  # stored like BraTS: i runs to the left, j to the back, k up (LPS)


def sri24_grid(spacing_mm: int) -> tuple[tuple[int, int, int], np.ndarray]:
    """(shape, affine) of the SRI24 field of view at ``spacing_mm`` on LPS-stored axes, in MNI millimetres:
    the MNI head's bounding box centred to within half a voxel, voxel centres on the block-averaged template's
    own lattice (so resampling it there is a pure shift). The whole head fits: it spans 145 x 181 x 155 mm
    (R, A, S), its lowest slice cut by the template's own edge."""
    mni = load_template(spacing_mm)
    voxels = np.argwhere(mni.head)
    corners = np.array([voxels.min(axis=0), voxels.max(axis=0)]) @ mni.affine[:3, :3].T + mni.affine[:3, 3]
    spacing = float(spacing_mm)
    shape = tuple(int(np.ceil(size / spacing - 1e-9)) for size in SRI24_FIELD_MM)
    steps = np.array(SRI24_AXIS_SIGNS) * spacing
    lattice = mni.affine[:3, 3]
    origin = corners.mean(axis=0) - steps * (np.array(shape) - 1) / 2
    origin = lattice + spacing * np.round((origin - lattice) / spacing)
    affine = np.diag([*steps, 1.0])
    affine[:3, 3] = origin
    return shape, affine


@functools.lru_cache(maxsize=4)
def sri24_template(spacing_mm: int) -> Template:
    """The MNI152 brain on the SRI24 atlas grid (:func:`sri24_grid`)."""
    return resample_template(load_template(spacing_mm), *sri24_grid(spacing_mm))


@dataclass
class Compartment:
    """A soft ellipsoid (or shell) of one tissue kind, in MNI millimetres."""

    kind: str
    center: tuple[float, float, float]
    radii: tuple[float, float, float]
    label: int  # segmentation label written for this compartment (0 = not part of the mask)
    shell: float = 0.0  # > 0: only a rim of this thickness (mm) is painted
    roughness: float = 0.25  # amplitude of the random-field perturbation of the outline


# The choroid plexus glomus in each lateral ventricle's atrium (MNI mm: the most CSF-filled 5 mm cube near the
# trigone of the 2009 template), in every study: a bright T1c spot that is not disease.
NORMAL_ENHANCEMENT = tuple(Compartment("choroid_plexus", (side * 20.0, -35.0, 20.0), (4.0, 8.0, 4.5), 0,
                                       roughness=0.3) for side in (-1.0, 1.0))


@dataclass
class Lesion:
    """One lesion at one timepoint; the RANO model reads the enhancing diameters and oedema volume from it."""

    lesion_id: str
    center: tuple[float, float, float]
    enhancing_radii: tuple[float, float, float]  # (R, A, S) semi-axes, mm; zeros = no enhancing tissue
    edema_factor: float = 1.5
    necrotic: bool = True

    @property
    def enhancing(self) -> bool:
        return min(self.enhancing_radii) > 0

    @property
    def diameters(self) -> tuple[float, float]:
        """Axial-plane diameters (R and A extents), the RANO bidimensional measurement."""
        return 2 * self.enhancing_radii[0], 2 * self.enhancing_radii[1]

    @property
    def edema_volume(self) -> float:
        r = [radius * self.edema_factor for radius in self.enhancing_radii]
        return 4.0 / 3.0 * np.pi * r[0] * r[1] * r[2] if self.enhancing else 0.0

    def compartments(self, labels: dict[str, int]) -> list[Compartment]:
        if not self.enhancing:
            return []
        radii = self.enhancing_radii
        parts = [
            Compartment("edema", self.center, tuple(r * self.edema_factor for r in radii), labels["edema"],
                        roughness=0.15),
            Compartment("enhancing", self.center, radii, labels["enhancing"], shell=3.0 if self.necrotic else 0.0,
                        roughness=0.06),
        ]
        if self.necrotic and min(radii) > 4:
            parts.append(Compartment("necrosis", self.center, tuple(r - 3.0 for r in radii), labels["necrosis"],
                                     roughness=0.06))
        return parts


def _soft_ellipsoid(grid, center, radii, field=None, roughness=0.0, stretch=None) -> np.ndarray:
    """Soft-edged (about 1.5 mm) ellipsoid; ``field`` (smooth, unit variance) perturbs the normalised distance
    and ``stretch`` (>= 0.5) lets the outline reach further where it is large."""
    r, a, s = grid
    distance = np.sqrt(
        ((r - center[0]) / radii[0]) ** 2 + ((a - center[1]) / radii[1]) ** 2 + ((s - center[2]) / radii[2]) ** 2
    )
    if field is not None and roughness:
        distance = distance * (1.0 + roughness * field)
    if stretch is not None:
        distance = distance / stretch
    width = 1.5 / max(min(radii), 1.0)
    return np.clip((1.0 + width / 2 - distance) / width, 0.0, 1.0)


def _ellipsoid_box(template: Template, compartment: Compartment, stretch_max: float) -> tuple[slice, ...]:
    """Voxels outside this box get weight 0 from :func:`_soft_ellipsoid` (so only the box is computed): the weight
    is 0 beyond the normalised distance 1 + width / 2, which the field (at most 1.6 in size, see
    :func:`_smooth_field`) and a stretch up to ``stretch_max`` can only push out by the factor below; a voxel of
    margin covers rounding."""
    shrink = 1.0 - 1.61 * compartment.roughness
    if shrink <= 0:
        return tuple(slice(0, size) for size in template.shape)
    width = 1.5 / max(min(compartment.radii), 1.0)
    reach = (1.0 + width / 2) * stretch_max / shrink
    box = []
    for axis, size in enumerate(template.shape):
        step, origin = template.affine[axis, axis], template.affine[axis, 3]
        ends = [(compartment.center[axis] + sign * reach * compartment.radii[axis] - origin) / step
                for sign in (-1, 1)]
        start, stop = int(np.floor(min(ends))) - 1, int(np.ceil(max(ends))) + 2
        box.append(slice(min(max(start, 0), size), min(max(stop, 0), size)))
    return tuple(box)


def _smooth_field(shape, sigma_vox: float, rng: np.random.Generator) -> np.ndarray:
    """A Gaussian random field of unit standard deviation, correlated over ``sigma_vox`` voxels."""
    from scipy import ndimage

    field = ndimage.gaussian_filter(rng.normal(0.0, 1.0, shape).astype(np.float32), sigma_vox)
    return np.clip(field / max(float(field.std()), 1e-6), -1.6, 1.6)


def _mass_effect(template: Template, compartments: list[Compartment]) -> Template:
    """Tissue maps pushed radially away from each space-occupying compartment (smooth, decaying deformation)."""
    masses = [c for c in compartments if c.kind in ("enhancing", "solid", "cyst", "enhancing_mild", "mismatch")]
    if not masses:
        return template
    r, a, s = template.ras_grid()
    dr, da, ds = (np.zeros(template.shape) for _ in range(3))
    for mass in masses:
        radius = float(np.mean(mass.radii))
        vr, va, vs = r - mass.center[0], a - mass.center[1], s - mass.center[2]
        distance = np.sqrt(vr**2 + va**2 + vs**2) + 1e-3
        push = 0.35 * radius * radius**2 / (distance**2 + radius**2)  # ~0.35 R at the edge, fading outwards
        dr, da, ds = dr + push * vr / distance, da + push * va / distance, ds + push * vs / distance
    spacing = np.abs(np.diag(template.affine)[:3])
    coordinates = _voxel_axes(template.shape)
    signs = np.sign(np.diag(template.affine)[:3])
    source = [coordinates[0] - signs[0] * dr / spacing[0], coordinates[1] - signs[1] * da / spacing[1],
              coordinates[2] - signs[2] * ds / spacing[2]]
    t1, gm, wm, csf = linear_map([template.t1, template.gm, template.wm, template.csf], source)
    return Template(t1, gm, wm, csf, template.head, template.affine)


def _bias_field(shape, rng: np.random.Generator) -> np.ndarray:
    """Smooth multiplicative receive-coil inhomogeneity, about +-10 %: a 4x4x4 random grid, cubic-spline
    upsampled (as ``ndimage.zoom(order=3)``, bit for bit)."""
    coarse = rng.normal(0.0, 1.0, (4, 4, 4)).astype(np.float32)
    field = cubic_zoom(coarse, tuple(shape))
    return 1.0 + 0.10 * field / max(float(np.abs(field).max()), 1e-6)


def _support(weight: np.ndarray) -> tuple[slice, ...] | None:
    """The bounding box of a weight map's non-zero voxels (None when it has none)."""
    from scipy import ndimage

    return next(iter(ndimage.find_objects((weight != 0).view(np.uint8))), None)


def render(
    template: Template, compartments: list[Compartment], rng: np.random.Generator
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Four int16 sequences and the uint8 label map of one study (with the normal enhancing anatomy)."""
    template = _mass_effect(template, compartments)
    compartments = [*NORMAL_ENHANCEMENT, *compartments]
    grid = template.ras_grid()
    spacing = float(np.abs(template.affine[0, 0]))
    field = _smooth_field(template.shape, 7.0 / spacing, rng)
    weights, dtypes = {}, set()
    for compartment in compartments:
        stretch = (0.55 + 0.8 * template.wm) if compartment.kind == "edema" else None
        # the weight is computed in the box it can be non-zero in (0 elsewhere), voxel for voxel as on the whole grid
        reach = _ellipsoid_box(template, compartment, 1.0 if stretch is None else float(stretch.max()))
        near = [axis[(slice(None),) * dim + (reach[dim],)] for dim, axis in enumerate(grid)]
        weight = _soft_ellipsoid(near, compartment.center, compartment.radii, field[reach], compartment.roughness,
                                 None if stretch is None else stretch[reach])
        if compartment.shell > 0:
            inner = tuple(max(radius - compartment.shell, 0.5) for radius in compartment.radii)
            weight = np.clip(weight - _soft_ellipsoid(near, compartment.center, inner, field[reach],
                                                      compartment.roughness * 1.3), 0.0, 1.0)
        if compartment.kind == "edema":
            weight = weight * (1.0 - template.csf[reach])  # vasogenic oedema spreads in white matter, not in CSF
        weight *= template.head[reach]
        dtypes.add(weight.dtype)
        box = _support(weight)
        if box is not None:  # a compartment outside the head paints nothing
            in_grid = tuple(slice(outer.start + inner.start, outer.start + inner.stop)
                            for outer, inner in zip(reach, box))
            weights.setdefault(compartment.kind, []).append((in_grid, weight[box], compartment.label))
    labels = np.zeros(template.shape, dtype=np.uint8)
    for kind in PAINT_ORDER:
        for box, weight, label in weights.get(kind, []):
            if label:
                labels[box][weight > 0.5] = label
    images = {}
    texture = rng.normal(0.0, 1.0, template.shape).astype(np.float32)
    for index, sequence in enumerate(SEQUENCES):
        wm, gm, csf = TISSUE_SIGNAL[sequence]
        image = template.wm * wm + template.gm * gm + template.csf * csf
        if sequence.startswith("T1"):
            image = 0.5 * image + 0.5 * template.t1 * 0.9  # keep the real template's T1 contrast and detail
        # blended only where a compartment's weight is not 0 (elsewhere the blend is image * 1 + 0), in the
        # precision the whole-volume blend had
        image = image.astype(np.result_type(image, *dtypes))
        for kind in PAINT_ORDER:
            for box, weight, _ in weights.get(kind, []):
                value = COMPARTMENT_SIGNAL[kind][index]
                image[box] = image[box] * (1 - weight) + weight * value * (1.0 + 0.05 * texture[box])
        image = image * _bias_field(template.shape, rng)
        sigma = 0.02
        real = image + rng.normal(0.0, sigma, template.shape)
        imaginary = rng.normal(0.0, sigma, template.shape)
        image = np.sqrt(real**2 + imaginary**2)  # magnitude of complex Gaussian noise: Rician
        images[sequence] = (np.clip(image, 0, 1.2) * 1000 * template.head).astype(np.int16)
    return images, labels


def native_study(images: dict[str, np.ndarray], template: Template, rng: np.random.Generator):
    """Resample template-space images onto a scanner grid: the head moved (rotation up to 6 degrees, shift up
    to 8 mm) and the voxel size of this study (isotropic, thicker slices, or finer in-plane). Returns (images,
    affine); the DeepBraTumIA segmentation stays in atlas space."""
    from scipy.spatial.transform import Rotation

    base = float(np.abs(template.affine[0, 0]))
    spacing = np.array([(1.0, 1.0, 1.0), (1.0, 1.0, 1.5), (0.9, 0.9, 2.0)][int(rng.integers(0, 3))]) * base
    rotation = Rotation.from_euler("xyz", rng.uniform(-6, 6, 3), degrees=True).as_matrix()
    extent = np.array(template.shape) * base
    shape = tuple(int(np.ceil(size)) for size in extent / spacing)
    centre = template.affine[:3, :3] @ ((np.array(template.shape) - 1) / 2) + template.affine[:3, 3]
    linear = rotation @ (np.sign(np.diag(template.affine)[:3]) * spacing * np.eye(3))
    origin = centre + rng.uniform(-8, 8, 3) - linear @ ((np.array(shape) - 1) / 2)
    affine = np.eye(4)
    affine[:3, :3], affine[:3, 3] = linear, origin
    to_template = np.linalg.inv(template.affine) @ affine
    resampled = linear_affine([image.astype(np.float32) for image in images.values()], to_template[:3, :3],
                              to_template[:3, 3], shape)
    return {name: image.round().astype(np.int16) for name, image in zip(images, resampled)}, affine

"""Seeded segmentation: region growing from seed points with leak stops.

Seeds are voxel indices (i, j, k) of the source volume; the caller converts RAS or screen points and refuses
seeds outside the volume. The region is the set of voxels connected to a seed (6-connectivity) whose intensity
lies in a range: ``confidence`` (the default) takes centre +- multiplier x spread of the tissue under the seeds
(:func:`seed_tissue`: statistics of the seeds' 3x3x3 neighbourhoods, fixed before growing, so the range never
drifts as the region grows); ``threshold`` takes [lower, upper].

Leak stops (why: a range that also covers the tissue next to the lesion floods the organ, or the whole volume,
from one touching voxel). The region grows one layer of neighbours at a time. A compact lesion's layer sizes rise,
then fall to nothing; when they fall (below :data:`LEAK_DIP` of their peak) and then rise again (above
:data:`LEAK_RISE` x the smallest layer since), the growth has passed through a narrow contact into neighbouring
tissue, and the region is cut at that narrowest layer (``leak``). When the median intensity of three successive
layers lies more than :data:`DRIFT_SPREADS` spreads of the seed tissue from its centre, the growth is adding
another tissue that the range happens to reach (grey matter at its lower end, FLAIR-bright gliosis or
white-matter disease against oedema, however broad the contact), and the region is cut before those layers
(``drift``). Growth also stops at ``max_volume_ml``. Holes left inside the region (a necrotic core in an
enhancing rim, a calcification) are filled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.dependencies import require
from .image import ImageVolume

METHODS = ("confidence", "threshold")
SEED_RADIUS_VOXELS = 1  # the seed region: each seed's 3x3x3 neighbourhood
ROBUST_SPREAD = 1.4826  # MAD -> standard deviation for normally distributed intensities
LEAK_DIP = 0.95  # layer sizes (3-layer mean) must fall below this fraction of their peak ...
LEAK_RISE = 1.5  # ... then rise above this many times the narrowest layer since (and by LEAK_MIN_VOXELS)
LEAK_MIN_VOXELS = 8
DRIFT_SPREADS = 1.25  # drift stop: 3 successive layers' median intensities this far from the seed tissue's centre
NOISE_SPREADS = 2.0  # the seed tissue's spread is at most this many times the image noise (and mean shift's window)
NOISE_REACH_VOXELS = 16  # the noise is measured within this many voxels of the seeds
MEAN_SHIFT_STEPS = 20
STOPS = ("complete", "leak", "drift", "volume_cap")


@dataclass(frozen=True)
class GrowingParameters:
    method: str = "confidence"
    lower: float | None = None  # threshold method: inclusive intensity range
    upper: float | None = None
    multiplier: float = 2.5  # confidence method: centre +- multiplier x spread of the seed tissue
    max_volume_ml: float = 500.0  # leak stop: growth ends at this volume
    drift_spreads: float = DRIFT_SPREADS  # drift stop (not offered to the agent; scripts/bench_segment_defaults.py)


@dataclass(frozen=True)
class GrownRegion:
    mask: np.ndarray  # bool [k, j, i]
    lower: float  # the intensity range the region was grown in
    upper: float
    stop: str  # complete (no neighbour in range) | leak (cut at the narrowest layer) | drift (cut before the
    # layers of another tissue) | volume_cap


@dataclass(frozen=True)
class SeedTissue:
    """The intensity of the tissue under the seeds: its centre and its robust spread (a standard deviation)."""

    centre: float
    spread: float


def seed_tissue(array: np.ndarray, seeds: list[tuple[int, int, int]]) -> SeedTissue:
    """Centre: the mode of the seed regions' intensities that mean shift reaches from the seed voxels' median (a
    seed next to an edge inside the lesion -- a necrotic core, the rim against the oedema -- has a mixed
    neighbourhood whose median can fall between the compartments, on the surrounding brain's intensity; the mode
    is the seed's own compartment). Spread: the seed regions' robust spread, at most :data:`NOISE_SPREADS` x the
    image noise around the seeds (an edge in the neighbourhood measures the edge's contrast, not the tissue's
    variation); the noise is also mean shift's window."""
    r = SEED_RADIUS_VOXELS
    values = np.concatenate([array[max(k - r, 0):k + r + 1, max(j - r, 0):j + r + 1, max(i - r, 0):i + r + 1]
                             .ravel().astype(float) for i, j, k in seeds])
    spread = ROBUST_SPREAD * float(np.median(np.abs(values - np.median(values))))
    noise = image_noise(array, seeds)
    centre = float(np.median([array[k, j, i] for i, j, k in seeds]))
    if noise > 0:
        spread = min(spread, NOISE_SPREADS * noise)
        for _ in range(MEAN_SHIFT_STEPS):
            window = values[np.abs(values - centre) <= NOISE_SPREADS * noise]
            if window.size == 0 or float(np.mean(window)) == centre:
                break
            centre = float(np.mean(window))
    return SeedTissue(centre, max(spread, 1e-6 * max(1.0, abs(centre))))


def image_noise(array: np.ndarray, seeds: list[tuple[int, int, int]]) -> float:
    """The noise's standard deviation near the seeds: the robust spread of differences between neighbouring voxels
    (over sqrt 2) within :data:`NOISE_REACH_VOXELS` of them; edges are too few of those pairs to move it. Pairs of
    equal value are left out: constant background (zero outside a skull strip, padding) holds no noise. 0 when
    there is none."""
    reach = NOISE_REACH_VOXELS
    box = tuple(slice(max(min(seed[axis] for seed in seeds) - reach, 0), max(seed[axis] for seed in seeds) + reach + 1)
                for axis in (2, 1, 0))
    crop = array[box].astype(float)
    differences = np.concatenate([np.diff(crop, axis=axis).ravel() for axis in range(3) if crop.shape[axis] > 1])
    differences = differences[differences != 0]
    if differences.size == 0:
        return 0.0
    return ROBUST_SPREAD * float(np.median(np.abs(differences))) / np.sqrt(2.0)


def intensity_range(tissue: SeedTissue, parameters: GrowingParameters) -> tuple[float, float]:
    """The inclusive range a voxel's intensity must lie in to join the region."""
    if parameters.method == "threshold":
        if parameters.lower is None or parameters.upper is None or parameters.lower > parameters.upper:
            raise ValueError("the threshold method needs lower <= upper")
        return float(parameters.lower), float(parameters.upper)
    return tissue.centre - parameters.multiplier * tissue.spread, tissue.centre + parameters.multiplier * tissue.spread


def _leak_layer(layers: list[int]) -> int | None:
    """The narrowest layer of a fall-then-rise in the layer sizes (smoothed over 3 layers), or None."""
    if len(layers) < 4:
        return None
    smooth = np.convolve(layers, np.ones(3) / 3.0, mode="valid")
    peak, narrowest = 0.0, None
    for index, size in enumerate(smooth):
        if narrowest is None:
            peak = max(peak, size)
            if size < LEAK_DIP * peak:
                narrowest = index
        elif size < smooth[narrowest]:
            narrowest = index
        elif size > LEAK_RISE * smooth[narrowest] + LEAK_MIN_VOXELS:
            return narrowest + 1  # smooth[i] is centred on layer i + 1
    return None


def grow_region(volume: ImageVolume, seeds_ijk: Sequence[Sequence[int]], parameters: GrowingParameters
                ) -> GrownRegion:
    """The region connected to the seeds, grown layer by layer with the leak stops of this module."""
    if parameters.method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}")
    if not parameters.max_volume_ml > 0:
        raise ValueError("max_volume_ml must be positive")
    if not parameters.drift_spreads > 0:
        raise ValueError("drift_spreads must be positive")
    seeds = [tuple(int(round(value)) for value in seed) for seed in seeds_ijk]
    if not seeds:
        raise ValueError("at least one seed is required")
    require("track_b")  # scipy: Track B's optional package, imported where used (a fresh Slicer may lack it)
    from scipy import ndimage
    array = volume.array
    tissue = seed_tissue(array, seeds)
    lower, upper = intensity_range(tissue, parameters)
    accepted = (array >= lower) & (array <= upper)
    region = np.zeros(array.shape, dtype=bool)
    for i, j, k in seeds:
        accepted[k, j, i] = region[k, j, i] = True  # a seed is in its own region, whatever its value
    cap_voxels = parameters.max_volume_ml * 1000.0 / volume.voxel_volume_mm3
    depth = np.full(array.shape, -1, dtype=np.int32)
    depth[region] = 0
    layers, grown, stop = [int(region.sum())], int(region.sum()), "complete"
    drifts: list[float] = []  # each grown layer's median intensity less the seed tissue's centre, in spreads
    neighbours = ndimage.generate_binary_structure(3, 1)
    box = tuple(slice(min(seed[axis] for seed in seeds), max(seed[axis] for seed in seeds) + 1) for axis in (2, 1, 0))
    while True:
        box = _widened(box, array.shape)
        layer = ndimage.binary_dilation(region[box], neighbours, mask=accepted[box]) & ~region[box]
        size = int(layer.sum())
        if size == 0:
            break
        region[box] |= layer
        depth[box][layer] = len(layers)
        layers.append(size)
        grown += size
        drifts.append((float(np.median(array[box][layer])) - tissue.centre) / tissue.spread)
        cut = _leak_layer(layers)
        if cut is not None:
            region, stop = (depth >= 0) & (depth <= cut), "leak"
            break
        if len(drifts) >= 3 and abs(sum(drifts[-3:])) > 3 * parameters.drift_spreads:
            region, stop = (depth >= 0) & (depth < len(layers) - 3), "drift"
            break
        if grown > cap_voxels:
            region, stop = (depth >= 0) & (depth < len(layers) - 1), "volume_cap"
            break
    return GrownRegion(ndimage.binary_fill_holes(region), lower, upper, stop)


def _widened(box: tuple[slice, ...], shape: tuple[int, ...]) -> tuple[slice, ...]:
    """``box`` one voxel wider on every side (where the next layer of the region can be), within the array."""
    return tuple(slice(max(axis.start - 1, 0), min(axis.stop + 1, size)) for axis, size in zip(box, shape))

"""Seeded segmentation: threshold-connected or confidence-connected region growing (SimpleITK).

Seeds are voxel indices (i, j, k) of the source volume; the caller converts RAS or screen points and refuses
seeds outside the volume. The grown region is hole-filled and restricted to the components that contain a
seed, so a leak never returns unrelated islands.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import SimpleITK as sitk

from .image import ImageVolume, to_sitk

METHODS = ("confidence", "threshold")


@dataclass(frozen=True)
class GrowingParameters:
    method: str = "confidence"
    lower: float | None = None  # threshold method: inclusive intensity range
    upper: float | None = None
    multiplier: float = 2.5  # confidence method: range = mean +- multiplier * std of the current region
    iterations: int = 3
    initial_radius_voxels: int = 1


def grow_region(volume: ImageVolume, seeds_ijk: Sequence[Sequence[int]], parameters: GrowingParameters) -> np.ndarray:
    """Boolean mask ``[k, j, i]`` of the region connected to the seeds."""
    if parameters.method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}")
    seeds = [tuple(int(round(value)) for value in seed) for seed in seeds_ijk]
    if not seeds:
        raise ValueError("at least one seed is required")
    image = to_sitk(volume)
    if parameters.method == "threshold":
        if parameters.lower is None or parameters.upper is None or parameters.lower > parameters.upper:
            raise ValueError("the threshold method needs lower <= upper")
        grown = sitk.ConnectedThreshold(
            image, seedList=seeds, lower=float(parameters.lower), upper=float(parameters.upper), replaceValue=1
        )
    else:
        grown = sitk.ConfidenceConnected(
            image,
            seedList=seeds,
            numberOfIterations=int(parameters.iterations),
            multiplier=float(parameters.multiplier),
            initialNeighborhoodRadius=int(parameters.initial_radius_voxels),
            replaceValue=1,
        )
    filled = sitk.BinaryFillhole(grown, fullyConnected=False, foregroundValue=1)
    return sitk.GetArrayFromImage(filled).astype(bool)

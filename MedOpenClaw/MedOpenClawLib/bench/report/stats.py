"""Means with percentile-bootstrap 95% intervals over episodes, and the same for averages and differences.

A :class:`Estimate` keeps its bootstrap draws, so a model average over modules or a Track B - Track A delta
gets its interval from the draws of its parts (independent resampling of each part), not from a normal
approximation. Resampling is seeded from the cell's name: a report is reproducible byte for byte.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95


@dataclass(frozen=True, eq=False)
class Estimate:
    value: float | None
    n: int
    draws: np.ndarray | None = None

    @property
    def interval(self) -> tuple[float | None, float | None]:
        if self.draws is None or self.value is None:
            return None, None
        tail = (1.0 - LEVEL) / 2.0 * 100.0
        low, high = np.percentile(self.draws, [tail, 100.0 - tail])
        return float(low), float(high)


MISSING = Estimate(None, 0)


def estimate(values: list[float], key: str) -> Estimate:
    """Mean of ``values`` with bootstrap draws of the mean (resampling episodes with replacement)."""
    if not values:
        return MISSING
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(zlib.crc32(key.encode("utf-8")))
    draws = data[rng.integers(0, len(data), size=(RESAMPLES, len(data)))].mean(axis=1)
    return Estimate(float(data.mean()), len(data), draws)


def average(parts: list[Estimate]) -> Estimate:
    """Unweighted average of several estimates (MedFlow-Bench's Model Avg.); missing when any part is missing."""
    if not parts or any(part.value is None for part in parts):
        return MISSING
    return Estimate(float(np.mean([part.value for part in parts])), sum(part.n for part in parts),
                    np.mean([part.draws for part in parts], axis=0))


def difference(new: Estimate, reference: Estimate) -> Estimate:
    """``new - reference`` (e.g. Track B minus Track A of the same backbone)."""
    if new.value is None or reference.value is None:
        return MISSING
    return Estimate(new.value - reference.value, new.n, new.draws - reference.draws)

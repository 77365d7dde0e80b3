"""The embedded default cohort: every module's synthetic dataset under one directory, from one seed.

``write_cohort(out)`` writes ``out/<dataset_dir>/`` (the directory its module spec names, the dataset's own) in
each dataset's own layout, so ``bench prepare --module M --source out/<dataset_dir>`` reads it with the same loader
as the real download. Same seed and config ->
byte-identical files (fixed UIDs, no timestamps, gzip mtime 0).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..modules import get, names

SIZES = {
    "demo": {"cases": 6, "mri_spacing_mm": 2.0, "slide_size": (16384, 12288), "ct_size": 256},
    "full": {"cases": 40, "mri_spacing_mm": 1.0, "slide_size": (32768, 24576), "ct_size": 512},
}


@dataclass(frozen=True)
class CohortConfig:
    """Size knobs; the defaults are the ``demo`` size (the README's demo on 2 cores in minutes)."""

    seed: int = 0
    cases: int = SIZES["demo"]["cases"]
    mri_spacing_mm: float = SIZES["demo"]["mri_spacing_mm"]
    slide_size: tuple[int, int] = SIZES["demo"]["slide_size"]  # every slide spans 24.6 mm of glass
    ct_size: int = SIZES["demo"]["ct_size"]  # CT matrix of the thorax (the field of view stays 330-380 mm)
    workers: int = field(default_factory=lambda: min(2, os.cpu_count() or 1))

    @classmethod
    def for_size(cls, size: str, **overrides) -> CohortConfig:
        """``demo`` (fast, coarse grids) or ``full`` (1 mm brains, 0.75 µm/px slides, more cases)."""
        if size not in SIZES:
            raise ValueError(f"unknown cohort size {size!r}; expected one of {', '.join(SIZES)}")
        return cls(**{**SIZES[size], **overrides})


def write_cohort(out: str | Path, config: CohortConfig = CohortConfig(),
                 modules: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Write the requested modules (default: every registered one), replacing earlier output of those modules;
    returns case ids per module."""
    if config.cases < 1:
        raise ValueError("a cohort needs at least one case per module")
    written = {}
    for module in names() if modules is None else modules:
        spec = get(module)
        root = Path(out) / spec.dataset_dir
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        written[module] = spec.write_synthetic(root, config)
    return written

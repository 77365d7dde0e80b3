"""Deterministic writing helpers shared by the cohort generators: seeded RNGs, UIDs, gzip without
timestamps."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import numpy as np

UID_ROOT = "2.25."  # UUID-derived UID root: a decimal integer from a hash, as DICOM PS3.5 B.2 allows


def rng_for(seed: int, *parts: object) -> np.random.Generator:
    """An independent generator per (seed, purpose), so adding one case never changes another."""
    digest = hashlib.sha256(repr((seed, *parts)).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def uid_for(seed: int, *parts: object) -> str:
    """A fixed, valid DICOM UID derived from the seed (same seed -> byte-identical files)."""
    digest = hashlib.sha256(repr(("uid", seed, *parts)).encode()).digest()
    return UID_ROOT + str(int.from_bytes(digest[:15], "big"))


def write_nifti(path: str | Path, data: np.ndarray, affine: np.ndarray) -> Path:
    """Write ``.nii.gz`` with gzip mtime 0 and no file name in the header (nibabel's own writer stamps
    both)."""
    import nibabel as nib

    image = nib.Nifti1Image(data, affine)
    image.header.set_xyzt_units("mm", "sec")
    image.set_qform(affine, code=1)
    image.set_sform(affine, code=1)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(image.to_bytes(), compresslevel=6, mtime=0))
    return path


def allocate(priors: dict[str, float], count: int, rng: np.random.Generator) -> list[str]:
    """``count`` class labels whose frequencies follow ``priors`` as closely as integers allow (largest
    remainder), in a seeded random order: small cohorts keep the real class mix instead of a lucky draw."""
    total = sum(priors.values())
    quotas = {label: count * weight / total for label, weight in priors.items()}
    counts = {label: int(quota) for label, quota in quotas.items()}
    by_remainder = sorted(priors, key=lambda label: (-(quotas[label] - counts[label]), list(priors).index(label)))
    for label in by_remainder[: count - sum(counts.values())]:
        counts[label] += 1
    labels = [label for label, number in counts.items() for _ in range(number)]
    rng.shuffle(labels)
    return labels

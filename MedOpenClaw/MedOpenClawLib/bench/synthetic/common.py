"""Deterministic writing helpers shared by the cohort generators: seeded RNGs, UIDs, gzip without
timestamps, a Gaussian blur."""

from __future__ import annotations

import functools
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


SHORT_KERNEL = 3  # radius (taps each side) up to which the first axis is blurred by whole planes
CHUNK_VALUES = 1 << 16  # values of the first axis's planes blurred at once (a float64 chunk stays in cache)


def gaussian_filter(array: np.ndarray, sigma, truncate: float = 4.0) -> np.ndarray:
    """``scipy.ndimage.gaussian_filter(array, sigma, truncate=truncate)`` of a float array, the same values bit for
    bit, in less CPU: scipy copies every line of an axis into a buffer, slow along the first axis, whose values lie
    a plane apart (a 1,056 px slide block: 34 ms for that pass, 14 ms here; a 256² CT, whose planes lie a power
    of two apart, 340 -> 75 ms), so a short kernel's pass along it is summed here by whole planes instead, in
    scipy's arithmetic (doubles, the centre tap, then each pair of taps from the outermost in)."""
    from scipy import ndimage

    if array.dtype not in (np.float32, np.float64):
        return ndimage.gaussian_filter(array, sigma, truncate=truncate)
    result = np.ascontiguousarray(array)  # scipy reads a view's lines (a box of a volume) slower than a copy's
    for axis, deviation in enumerate(np.broadcast_to(np.asarray(sigma, dtype=float), (array.ndim,)).tolist()):
        if deviation <= 1e-15:  # scipy leaves such an axis alone
            continue
        weights = _gaussian_weights(deviation, truncate)
        if axis == 0 and len(weights) // 2 <= SHORT_KERNEL < array.shape[0]:
            result = _first_axis_pass(result, weights)
        else:
            result = ndimage.gaussian_filter1d(result, deviation, axis, truncate=truncate)
    return result.copy() if result is array else result


@functools.lru_cache(maxsize=32)
def _gaussian_weights(sigma: float, truncate: float) -> np.ndarray:
    """scipy's kernel for ``sigma``, read off its filter of a unit impulse (each output is one weight times 1)."""
    from scipy import ndimage

    radius = int(truncate * sigma + 0.5)
    impulse = np.zeros(2 * radius + 1)
    impulse[radius] = 1.0
    weights = ndimage.gaussian_filter1d(impulse, sigma, truncate=truncate, mode="constant")[::-1].copy()
    weights.flags.writeable = False
    return weights


def _first_axis_pass(array: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``array`` correlated along axis 0 with the odd, symmetric ``weights`` (mode 'reflect'), as scipy sums it."""
    radius, count = len(weights) // 2, array.shape[0]
    rows = np.arange(-radius, count + radius)
    rows = np.where(rows < 0, -rows - 1, np.where(rows >= count, 2 * count - 1 - rows, rows))  # d c b a | a b c d
    result = np.empty_like(array)
    step = max(CHUNK_VALUES // max(array[0].size, 1), 1)
    for start in range(0, count, step):
        stop = min(start + step, count)
        lines = array.take(rows[start:stop + 2 * radius], axis=0).astype(np.float64)
        total = lines[radius:radius + stop - start] * weights[radius]
        for offset in range(radius, 0, -1):
            pair = lines[radius - offset:radius - offset + stop - start] + lines[radius + offset:radius + offset
                                                                                 + stop - start]
            pair *= weights[radius - offset]
            total += pair
        result[start:stop] = total
    return result

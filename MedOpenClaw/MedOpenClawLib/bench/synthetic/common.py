"""Deterministic writing helpers shared by the cohort generators: seeded RNGs, UIDs, gzip without
timestamps."""

from __future__ import annotations

import ctypes
import gzip
import hashlib
import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
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


_SHARED_POOL = None  # the worker pool of :func:`shared_pool` while it is open (every thread's run_jobs uses it)


@contextmanager
def shared_pool(workers: int) -> Iterator[None]:
    """One pool of ``workers`` processes for every :func:`run_jobs` inside the block, from any thread: several
    modules generated at once share it, so the cores stay busy through each module's last cases and its serial
    steps, and the workers start once instead of once per module."""
    global _SHARED_POOL
    with _process_pool(workers) as pool:
        _SHARED_POOL = pool
        try:
            yield
        finally:
            _SHARED_POOL = None


def run_jobs(function, jobs: list[tuple], workers: int) -> list:
    """``function(*job)`` for every job, in worker processes when ``workers`` > 1 or a :func:`shared_pool` is
    open (one case per job: cases are independent and seeded per case, so the output does not depend on the
    number of workers or on what else the pool runs)."""
    pool = _SHARED_POOL
    if pool is not None:
        return [future.result() for future in [pool.submit(function, *job) for job in jobs]]
    if workers <= 1 or len(jobs) <= 1:
        return [function(*job) for job in jobs]
    with _process_pool(min(workers, len(jobs))) as pool:
        return list(pool.map(function, *zip(*jobs)))


def _process_pool(workers: int) -> ProcessPoolExecutor:
    # spawn: a worker forked from a process with threads (a run's progress line, shared_pool's callers) could
    # inherit a lock held by another thread
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_reuse_freed_memory)


def _reuse_freed_memory() -> None:
    """A generator worker keeps the memory it frees for its next arrays (glibc; elsewhere nothing changes): by
    default glibc maps large arrays anew (over its threshold, which grows to at most 32 MB) and trims freed memory
    at the heap's top, so a slide's blocks (13 MB float32 RGB each, strips of 50 MB) faulted their pages in again
    and again (a demo slide: 311k page faults and 1.9 s of system time; 59k and 0.2 s with these settings)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process runs on
    except (OSError, AttributeError, TypeError):  # no mallopt (macOS), no dlopen(NULL) (Windows)
        return
    mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD: arrays under 64 MB come from the heap, reused once freed
    mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD: up to 256 MB freed at the heap's top stays for the next arrays

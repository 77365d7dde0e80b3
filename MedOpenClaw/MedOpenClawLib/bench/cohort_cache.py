"""The cache of the embedded synthetic cohort that ``bench run`` reads when no ``--cases`` is given.

One folder per cohort (``synthetic-<fingerprint>-<size>-seed<seed>-n<cases>``), one case package per module inside.
A package is generated once: under a file lock per package, so a second process that wants it while the first
generates it waits and then reuses it (two first uses once both spent minutes generating it); built in a staging
folder and renamed into place, so an interrupted generation is simply redone. A change of the sources that decide
a package changes the fingerprint (a stale cohort is never reused); :func:`prune` removes the other fingerprints.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path

from filelock import FileLock, Timeout

from ..core import settings
from .modules import get
from .package import prepare
from .progress import Activity
from .synthetic.cohort import CohortConfig, write_cohort
from .synthetic.pool import shared_pool

COHORT_PREFIX = "synthetic-"


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """``cache_dir``, else ``MEDOPENCLAW_CACHE``, else ``~/.cache/medopenclaw``; absolute."""
    root = cache_dir or settings.value("MEDOPENCLAW_CACHE") or Path.home() / ".cache" / "medopenclaw"
    return Path(root).expanduser().resolve()


def cohort_fingerprint() -> str:
    """Hash of the sources that decide a prepared package (generators, loaders, module specs and answer
    vocabularies, the ground-truth rules, the file manifest and the DICOM geometry CT masks are placed
    with): a change never reuses a stale cohort."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted([*(package / "synthetic").glob("*.py"), *(package / "kit").glob("*.py"),
                        *(package / "modules").rglob("*.py"), package / "spec.py", package / "cases.py",
                        package / "package.py", package / "truth_check.py", package / "integrity.py",
                        package / "scoring" / "geometry.py",
                        package.parent / "viewer" / "dicom_series.py"]):
        digest.update(path.relative_to(package.parent).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def synthetic_cases(module: str, seed: int = 0, cases: int | None = None, cache_dir: str | os.PathLike | None = None,
                    size: str = "demo", step: str = "") -> Path:
    """The embedded synthetic cohort of ``module`` as a case package, generated once and cached. ``size`` is a
    :data:`synthetic.cohort.SIZES` preset; ``cases`` overrides its case count; ``step`` (e.g. ``2/5``) says where
    this module stands among those a command prepares."""
    config, root = _cohort(seed, cases, cache_dir, size)
    package = root / "cases" / module
    if not (package / "manifest.json").exists():
        _generate_once(module, config, root, f"cohort {module} {step}".rstrip(), announce=True)
    return package


def synthetic_packages(modules: list[str], seed: int = 0, cases: int | None = None,
                       cache_dir: str | os.PathLike | None = None, size: str = "demo") -> dict[str, Path]:
    """:func:`synthetic_cases` of every module in ``modules``; the missing ones are generated at once, their cases
    in one pool of the config's workers (a module alone leaves a core idle through its last cases and its serial
    steps: its tables, ``prepare``). One line per module when it is done, in the order they finish."""
    config, root = _cohort(seed, cases, cache_dir, size)
    steps = {module: f"{number}/{len(modules)}" for number, module in enumerate(modules, 1)}
    missing = [module for module in modules if not (root / "cases" / module / "manifest.json").exists()]
    if len(missing) < 2 or config.workers < 2:
        return {module: synthetic_cases(module, seed, cases, cache_dir, size, steps[module]) for module in modules}
    with Activity(f"cohort: generating {_cases_text(config)} of {len(missing)} modules at once ({root.name})",
                  total=len(missing)) as activity:
        def generate(module: str) -> None:
            started = time.monotonic()
            _generate_once(module, config, root, f"cohort {module} {steps[module]}", announce=False)
            activity.advance()
            activity.note(f"cohort {module} {steps[module]}: {_cases_text(config)} "
                          f"({time.monotonic() - started:.0f} s): done")

        with shared_pool(config.workers), ThreadPoolExecutor(len(missing)) as threads:
            for future in [threads.submit(generate, module) for module in missing]:
                future.result()  # the first module that failed raises, once all have ended
    return {module: root / "cases" / module for module in modules}


def _cohort(seed: int, cases: int | None, cache_dir, size: str) -> tuple[CohortConfig, Path]:
    """The config and cache folder of a cohort; ``cases`` None: MEDOPENCLAW_COHORT_CASES, else the size's."""
    cases = cases_setting() if cases is None else cases
    config = CohortConfig.for_size(size, seed=seed, **({} if cases is None else {"cases": cases}))
    return config, cache_root(cache_dir) / f"{COHORT_PREFIX}{cohort_fingerprint()}-{size}-seed{seed}-n{config.cases}"


def cases_setting() -> int | None:
    """MEDOPENCLAW_COHORT_CASES as a count (None when unset): a smaller cohort for whoever needs only a few cases
    (the test suite reads two per module), cached beside the full-count one."""
    text = settings.value("MEDOPENCLAW_COHORT_CASES")
    if not text:
        return None
    if not text.isdecimal() or int(text) < 1:
        raise ValueError(f"MEDOPENCLAW_COHORT_CASES must be a whole number of cases, 1 or more (got {text!r})")
    return int(text)


def _cases_text(config: CohortConfig) -> str:
    return f"{config.cases} case" + "s" * (config.cases != 1)


def _generate_once(module: str, config: CohortConfig, root: Path, label: str, announce: bool) -> None:
    """Generate ``module``'s package under its file lock, unless another process made it meanwhile; ``announce``:
    show the generation as an :class:`Activity` of its own."""
    package = root / "cases" / module
    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(root / f".{module}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:  # said at once (also in logs): the wait can last minutes
        print(f"{label}: waiting for another process generating it", file=sys.stderr, flush=True)
        lock.acquire()
    try:
        if not (package / "manifest.json").exists():  # the process we waited for made it
            with Activity(f"{label}: generating {_cases_text(config)} ({root.name})") if announce else nullcontext():
                _generate(module, config, root)
    finally:
        lock.release()


def _generate(module: str, config, root: Path) -> None:
    staging = root / f"staging-{module}-{os.getpid()}"
    package = root / "cases" / module
    try:
        write_cohort(staging / "raw", config, modules=[module])
        spec = get(module)
        prepare(spec, staging / "raw" / spec.dataset_dir, staging / "cases")
        package.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / "cases", package)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # packages hard-link (or copy) files: the raw layout can go


def cached_cohorts(root: Path) -> dict:
    """What the cohort cache holds: each cached cohort's folder and its prepared modules."""
    cohorts = {}
    for folder in sorted(root.glob(f"{COHORT_PREFIX}*")) if root.is_dir() else []:
        modules = sorted(package.name for package in (folder / "cases").glob("*") if (package / "manifest.json")
                         .is_file())
        cohorts[folder.name] = {"path": str(folder / "cases"), "modules": modules}
    return cohorts


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder``, each inode once (packages hard-link their files)."""
    seen, total = set(), 0
    for path in folder.rglob("*"):
        stat = path.lstat()
        if path.is_file() and (stat.st_dev, stat.st_ino) not in seen:
            seen.add((stat.st_dev, stat.st_ino))
            total += stat.st_size
    return total


def prune(root: Path) -> dict:
    """Remove every cached cohort of another fingerprint than the current sources' (never reused again); the
    current fingerprint's cohorts stay, whatever their size or seed."""
    current = cohort_fingerprint()
    removed, freed = [], 0
    for folder in sorted(root.glob(f"{COHORT_PREFIX}*")) if root.is_dir() else []:
        if folder.is_dir() and not folder.name.startswith(f"{COHORT_PREFIX}{current}-"):
            freed += folder_bytes(folder)
            shutil.rmtree(folder)
            removed.append(folder.name)
    return {"cache": str(root), "kept_fingerprint": current, "removed": removed, "freed_bytes": freed}

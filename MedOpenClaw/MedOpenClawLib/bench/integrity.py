"""Case-package integrity: the size and sha256 of every agent-visible file, written by ``bench prepare`` and
verified when an episode opens the case.

A file changed or truncated after prepare (a half-copied package, an edited slice, a re-downloaded volume)
would otherwise load as something else -- a truncated NIfTI reads as zeros -- and be scored against ground
truth prepared from the original. Verification is cheap after the first time: a file whose size and mtime are
those seen when it last verified is not hashed again (one cache per process, i.e. per runner worker).
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

HASH_CHUNK = 1 << 20


class CaseIntegrityError(Exception):
    """An agent-visible file of a case differs from the package manifest: the episode is INVALID."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(HASH_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_records(directory: Path, root: Path) -> dict[str, dict]:
    """``{path relative to root: {"size", "sha256"}}`` for every file under ``directory``."""
    return {
        path.relative_to(root).as_posix(): {"size": path.stat().st_size, "sha256": sha256_of(path)}
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


_verified: dict[str, tuple[int, int, str]] = {}  # absolute path -> (size, mtime_ns, sha256) last verified
_verified_lock = threading.Lock()


def _verify_file(path: Path, expected: dict) -> str | None:
    """None when ``path`` matches its manifest record, else what is wrong with it."""
    try:
        stat = path.stat()
    except OSError as error:
        return f"{path.name} is missing or unreadable ({error.strerror or error})"
    if stat.st_size != expected["size"]:
        return f"{path.name} has {stat.st_size} bytes, the manifest says {expected['size']} (changed or truncated)"
    key = str(path)
    with _verified_lock:
        cached = _verified.get(key)
    if cached == (stat.st_size, stat.st_mtime_ns, expected["sha256"]):
        return None
    if sha256_of(path) != expected["sha256"]:
        return f"{path.name}: sha256 differs from the manifest (the file changed after prepare)"
    with _verified_lock:
        _verified[key] = (stat.st_size, stat.st_mtime_ns, expected["sha256"])
    return None


def verify_case_files(case) -> None:
    """Check every agent-visible file of ``case`` (a :class:`~.cases.Case`) against its manifest record, and
    that no file was added; raise :class:`CaseIntegrityError` naming the first problems found."""
    if not case.files:
        raise CaseIntegrityError(
            f"case {case.case_id} has no file records in its manifest (prepared by an older version: re-run "
            "bench prepare)"
        )
    problems = [problem for relative, record in sorted(case.files.items())
                if (problem := _verify_file(case.path(relative), record))]
    present = {path.relative_to(case.cases_dir).as_posix()
               for path in case.data_root.rglob("*") if path.is_file()} if case.data_root.is_dir() else set()
    problems += [f"{Path(extra).name} was added after prepare" for extra in sorted(present - set(case.files))]
    if problems:
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        raise CaseIntegrityError(f"case {case.case_id} does not match its manifest: {shown}")

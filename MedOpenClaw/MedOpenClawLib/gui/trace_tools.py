"""Export, verify and replay of a session trace, as the audit panel's buttons offer them.

An export is one zip an auditor can check on another machine: the JSONL trace and every image it references,
at the same relative paths, so ``medopenclaw trace verify`` works on the unpacked copy unchanged.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from ..core.audit import VerifyReport, read_trace, verify_trace
from ..replay import ReplayReport, replay_trace


def referenced_files(trace_path: Path) -> list[Path]:
    """The artifact files (rendered views, exported evidence) the records point to, relative to the trace."""
    paths: dict[str, None] = {}
    for record in read_trace(trace_path):
        for artifact in record.get("artifacts", []):
            paths[artifact["path"]] = None
    return [Path(path) for path in paths]


def export_trace(trace_path: str | os.PathLike, destination: str | os.PathLike) -> Path:
    """Write ``destination`` (.zip) with the trace and its artifacts; refuses to export a broken chain."""
    trace_path, destination = Path(trace_path), Path(destination)
    report = verify_trace(trace_path)
    if not report.ok:
        raise ValueError(f"not exporting a trace that fails verification: {report.message}")
    base = trace_path.parent
    destination.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(destination, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.write(trace_path, trace_path.name)
        for relative in referenced_files(trace_path):
            archive.write(base / relative, relative.as_posix())
    return destination


def verify(trace_path: str | os.PathLike) -> VerifyReport:
    return verify_trace(trace_path)


def replay(trace_path: str | os.PathLike, data_roots: list[str | os.PathLike]) -> ReplayReport:
    """Re-run the trace on a fresh headless scene (never the user's scene, even inside the Slicer GUI)."""
    return replay_trace(trace_path, data_roots)

"""Helpers of the panel and copilot tests (and scripts/gui_screenshots.py): a two-volume synthetic case on a real
slicer-core scene, a session trace that saves its images, a QApplication for the offscreen widget tests, and a Qt
event pump. The ``slicer_session``/``qt_application`` fixtures in conftest.py call them."""

from __future__ import annotations

import os
from pathlib import Path

import nibabel as nib
import numpy as np

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.core.audit import AuditTrace

SHAPE = (32, 32, 16)
SPACING = (1.0, 1.0, 2.0)
LESION = (slice(12, 18), slice(14, 20), slice(6, 10))


def write_case(directory: Path) -> Path:
    """T1 and FLAIR of one synthetic head: noisy background, a bright box lesion at a known place."""
    directory.mkdir(parents=True, exist_ok=True)
    affine = np.diag([*SPACING, 1.0])
    affine[:3, 3] = [-16.0, -16.0, -16.0]
    rng = np.random.default_rng(7)
    for name, lesion_value in (("T1", 600), ("FLAIR", 900)):
        array = rng.normal(100, 8, SHAPE).astype(np.int16)
        array[LESION] = lesion_value
        nib.save(nib.Nifti1Image(array, affine), str(directory / f"{name}.nii.gz"))
    return directory


def open_slicer_session(tmp_path: Path, max_rounds: int | None = None):
    """A registry over a fresh headless scene with the case opened by the clinician (actor human)."""
    case = write_case(tmp_path / "data" / "case1")
    trace = AuditTrace(tmp_path / "session" / "trace.jsonl", header={"front_end": "test"}, save_images=True)
    registry = build_slicer_registry([tmp_path / "data"], trace=trace, max_rounds=max_rounds)
    opened = registry.call("open_case", {"dicom_dir": str(case), "size": 128}, actor="human")
    assert opened.ok, opened.error
    return registry


def start_qt_application():
    """The process's QApplication (offscreen unless QT_QPA_PLATFORM says otherwise)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from MedOpenClawLib.gui.qt_compat import application

    return application()


def pump(until, timeout_s: float = 60.0) -> None:
    """Run the Qt event loop (timers, socket notifiers) on this thread until ``until()`` holds. The deadline only
    ends a test that failed: a model process's start (a Python, a vendor's SDK imported) took over 10 s on 2 cores
    shared by a dozen processes."""
    import time

    from MedOpenClawLib.gui.qt_compat import process_events

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        process_events()
        if until():
            return
        time.sleep(0.005)
    raise AssertionError("condition not reached while pumping Qt events")

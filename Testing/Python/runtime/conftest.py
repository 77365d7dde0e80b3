"""Fixtures of the runtime tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def typed_run(tmp_path_factory) -> tuple[Path, dict]:
    """(working directory, printed summary) where a user typed ``bench cohort``, ``bench prepare`` and ``bench run``
    with relative paths through the console script: ``cases`` holds one UCSF-PDGM case, ``runs/x`` its oracle run.
    Made once (a viewer start and a generation): test_cli_paths goes on from it with every other sub-command, and
    test_cli_errors reads the same run and cases where the viewer cannot be imported. Read only."""
    from console_script import CONSOLE_SCRIPT, medopenclaw

    assert CONSOLE_SCRIPT.is_file(), "install the package (pip install -e .) so the medopenclaw command exists"
    cwd = tmp_path_factory.mktemp("typed") / "work"
    cwd.mkdir()
    # 4 mm brains (the demo's are 2 mm): the paths are the same, the generation 2.2 -> 1.0 s of CPU
    medopenclaw(cwd, "bench", "cohort", "--out", "raw", "--modules", "ucsf-pdgm", "--cases", "1", "--mri-spacing", "4")
    medopenclaw(cwd, "bench", "prepare", "--module", "ucsf-pdgm", "--source", "raw/UCSF-PDGM", "--out", "cases")
    summary = json.loads(medopenclaw(cwd, "bench", "run", "--module", "ucsf-pdgm", "--agent", "oracle", "--cases",
                                     "cases", "--limit", "1", "--out", "runs/x").splitlines()[-1])
    return cwd, summary

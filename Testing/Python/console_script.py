"""The installed ``medopenclaw`` console script run as a user runs it: its own process, a working directory of its
own, this checkout's packages on the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPT = Path(sys.executable).with_name("medopenclaw")  # what `pip install -e .` put next to python


def run_console(cwd: Path, *argv: str, input: str | None = None) -> subprocess.CompletedProcess:
    """``medopenclaw ARGV...`` run from ``cwd``: exit status, stdout and stderr as text."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "MedOpenClaw"), str(REPO / "MedCopilot")])}
    return subprocess.run([str(CONSOLE_SCRIPT), *argv], cwd=cwd, env=env, input=input, capture_output=True,
                          text=True, timeout=600)


def medopenclaw(cwd: Path, *argv: str, input: str | None = None) -> str:
    """The console script run as a user runs it; its stdout (stderr shown when it fails)."""
    completed = run_console(cwd, *argv, input=input)
    assert completed.returncode == 0, (argv, completed.stderr[-2000:])
    return completed.stdout

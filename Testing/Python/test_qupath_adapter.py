"""The QuPath-only adapter, compiled against recording stubs of the QuPath API it may use.

``scripts/build_qupath_bridge.sh --check-adapter`` compiles src/qupath against src/test/stubs (each stub names
the QuPath source file it mirrors; a reference to any QuPath class outside them fails the build) and runs the
checks in src/test/java: images open through ImageServers.buildServer + QuPathViewer.setImageData with an
explicit image type and never through the prompting QuPathGUI.openImage; calls under a modal dialog are
refused at once (viewer_busy) and a stalled JavaFX thread is not waited on (viewer_unresponsive); the
connection file is owner-only with each strategy (POSIX, Windows ACL choice, file flags).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

if shutil.which("javac") is None or shutil.which("java") is None:
    pytest.skip("javac/java not found: the QuPath adapter cannot be compiled", allow_module_level=True)


def test_adapter_compiles_against_the_qupath_api_stubs_and_passes_its_checks(tmp_path):
    ran = subprocess.run(["bash", str(ROOT / "scripts" / "build_qupath_bridge.sh"), "--check-adapter"],
                         env={**os.environ, "PYTHON": sys.executable, "MEDOPENCLAW_BRIDGE_BUILD": str(tmp_path)},
                         capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, (ran.stdout[-3000:], ran.stderr[-3000:])
    assert "QuPathViewerPortCheck passed" in ran.stdout and "OwnerOnlyFileCheck passed" in ran.stdout
    assert "no prompting QuPath API was called" in ran.stdout
    assert (tmp_path / "medopenclaw-qupath-extension.jar").exists()

"""The QuPath-only adapter, compiled against recording stubs of the QuPath API it may use.

``scripts/build_qupath_bridge.sh --check-adapter`` compiles src/qupath against src/test/stubs (each stub names
the QuPath source file it mirrors; a reference to any QuPath class outside them fails the build) and runs the
checks in src/test/java: images open through ImageServers.buildServer + QuPathViewer.setImageData with an
explicit image type and never through the prompting QuPathGUI.openImage; calls under a modal dialog are
refused at once (viewer_busy) and a stalled JavaFX thread is not waited on (viewer_unresponsive); the
connection file is owner-only with each strategy (POSIX, Windows ACL choice, file flags); QuPath 0.6's refusal of
a brightfield type on a non-RGB image is ``invalid_argument``. The stubs are compiled at class version 65 (JDK 21),
as QuPath 0.6 is, so a javac older than 21 fails here as it does against the real QuPath 0.6.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]



def javac_major(javac: str) -> int:
    ran = subprocess.run([javac, "-version"], capture_output=True, text=True, check=False)
    match = re.match(r"javac (\d+)", (ran.stdout or ran.stderr).strip())
    return int(match.group(1)) if match else 0


def jdk_21() -> dict[str, str] | None:
    """JAVAC/JAVA/JAR of a JDK 21 or newer (QuPath 0.6's; the stubs are compiled at its class version 65): the
    one on PATH or given by JAVAC, else one installed in the Debian/Ubuntu location, /usr/lib/jvm."""
    candidates = [os.environ.get("JAVAC"), shutil.which("javac"), *sorted(glob.glob("/usr/lib/jvm/*/bin/javac"))]
    for javac in filter(None, candidates):
        if javac_major(javac) >= 21:
            bin_dir = Path(javac).parent
            return {"JAVAC": javac, "JAVA": str(bin_dir / "java"), "JAR": str(bin_dir / "jar")}
    return None


JDK = jdk_21()
if JDK is None:
    pytest.skip("no JDK 21+ (javac): the QuPath 0.6 adapter cannot be compiled (.ci/run installs "
                "openjdk-21-jdk-headless or, on Debian 12, Adoptium's temurin-21-jdk)", allow_module_level=True)


def test_adapter_compiles_against_the_qupath_api_stubs_and_passes_its_checks(tmp_path):
    ran = subprocess.run(["bash", str(ROOT / "scripts" / "build_qupath_bridge.sh"), "--check-adapter"],
                         env={**os.environ, **JDK, "PYTHON": sys.executable, "MEDOPENCLAW_BRIDGE_BUILD": str(tmp_path)},
                         capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, (ran.stdout[-3000:], ran.stderr[-3000:])
    assert "QuPathViewerPortCheck passed" in ran.stdout and "OwnerOnlyFileCheck passed" in ran.stdout
    assert "no prompting QuPath API was called" in ran.stdout
    assert (tmp_path / "medopenclaw-qupath-extension.jar").exists()

"""The QuPath-only adapter, compiled against recording stubs of the QuPath API it may use.

``scripts/build_qupath_bridge.sh --check-adapter`` compiles src/qupath against src/test/stubs (each stub names
the QuPath source file it mirrors; a reference to any QuPath class outside them fails the build) and runs the
checks in src/test/java: images open through ImageServers.buildServer + QuPathViewer.setImageData with an
explicit image type and never through the prompting QuPathGUI.openImage; calls under a modal dialog are
refused at once (viewer_busy) and a stalled JavaFX thread is not waited on (viewer_unresponsive); the
connection file is owner-only with each strategy (POSIX, Windows ACL choice, file flags); QuPath 0.6's refusal of
a brightfield type on a non-RGB image is ``invalid_argument``; an agent's load_image never discards unsaved changes;
the extension's menu chooses the data folders and starts/stops the bridge, and it declares getQuPathVersion and its
GitHub repository. The stubs mirror QuPath 0.7.0's API (0.5/0.6 have the same calls) and are compiled at the class
version of each release checked: 65 (JDK 21) as QuPath 0.6 is, 69 (JDK 25) as QuPath 0.7 is, so a javac older than
the release's fails here as it does against the real QuPath.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@functools.cache
def javac_major(javac: str) -> int:
    """The major version of ``javac`` (a resolved path: /usr/bin/javac and /usr/lib/jvm/*/bin/javac are often the
    same JDK), asked once per module: each -version is a JVM start."""
    ran = subprocess.run([javac, "-version"], capture_output=True, text=True, check=False)
    match = re.match(r"javac (\d+)", (ran.stdout or ran.stderr).strip())
    return int(match.group(1)) if match else 0


def jdk(major: int) -> dict[str, str] | None:
    """JAVAC/JAVA/JAR of a JDK ``major`` or newer: the one on PATH or given by JAVAC, else one installed in the
    Debian/Ubuntu location, /usr/lib/jvm."""
    candidates = [os.environ.get("JAVAC"), shutil.which("javac"), *sorted(glob.glob("/usr/lib/jvm/*/bin/javac"))]
    for javac in filter(None, candidates):
        if javac_major(os.path.realpath(javac)) >= major:
            bin_dir = Path(javac).parent
            return {"JAVAC": javac, "JAVA": str(bin_dir / "java"), "JAR": str(bin_dir / "jar")}
    return None


# QuPath release -> the JDK it is built with (its class version): 0.6 JDK 21 (65), 0.7 JDK 25 (69; qupath/qupath
# v0.7.0 gradle/libs.versions.toml: jdk = "25")
QUPATH_JDKS = {"0.6": 21, "0.7": 25}


@pytest.mark.parametrize("release", sorted(QUPATH_JDKS))
def test_adapter_compiles_against_the_qupath_api_stubs_and_passes_its_checks(tmp_path, release):
    found = jdk(QUPATH_JDKS[release])
    if found is None:
        pytest.skip(f"no JDK {QUPATH_JDKS[release]}+ (javac): the QuPath {release} adapter cannot be compiled "
                    "(.ci/run installs openjdk-21/25-jdk-headless or Adoptium's temurin-21/25-jdk)")
    env = {**os.environ, **found, "PYTHON": sys.executable, "MEDOPENCLAW_BRIDGE_BUILD": str(tmp_path),
           "QUPATH_STUBS_RELEASE": str(QUPATH_JDKS[release])}
    ran = subprocess.run(["bash", str(ROOT / "scripts" / "build_qupath_bridge.sh"), "--check-adapter"], env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, (ran.stdout[-3000:], ran.stderr[-3000:])
    assert "QuPathViewerPortCheck passed" in ran.stdout and "OwnerOnlyFileCheck passed" in ran.stdout
    assert "QuPathBridgeExtensionCheck passed" in ran.stdout
    assert "no prompting QuPath API was called" in ran.stdout
    assert (tmp_path / "medopenclaw-qupath-extension.jar").exists()
    scratch = sorted(path.name for path in (tmp_path / "check-scratch").iterdir())
    assert [name.rstrip("0123456789") for name in scratch] == ["owner-only", "qupath-home", "qupath-port"]

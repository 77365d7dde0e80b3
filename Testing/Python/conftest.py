"""Fixtures shared by the test folders (one folder per package of MedOpenClawLib / MedCopilotLib).

This folder also holds the shared doubles, fakes and data writers (slicer_app_double, agents_fakes, runtime_data,
...): pytest puts the folder of this conftest.py on ``sys.path``, so every test imports them by name. A fixture
used by one folder only lives in that folder's conftest.py. Imports are inside the fixtures: the Slicer-release
checks (scripts/check_slicer_release.py) load this file under Python 3.9 without the heavy packages.
"""

from __future__ import annotations

import pytest


def pytest_configure(config):
    """Plain ``pytest`` caches the synthetic cohort where ctest does, in this checkout's build/cohort-cache
    (CMake/MedOpenClawStandalone.cmake), never in the user's ~/.cache/medopenclaw (about 300 MB per cohort
    fingerprint, kept until pruned), and with ctest's two cases per module; a MEDOPENCLAW_CACHE or
    MEDOPENCLAW_COHORT_CASES that is set chooses another. They go into the environment, so the CLI processes that
    tests start use them too."""
    import os
    from pathlib import Path

    defaults = {"MEDOPENCLAW_CACHE": str(Path(__file__).resolve().parents[2] / "build" / "cohort-cache"),
                "MEDOPENCLAW_COHORT_CASES": "2"}
    for name, default in defaults.items():
        if not os.environ.get(name, "").strip():
            os.environ[name] = default


@pytest.fixture()
def data_root(tmp_path):
    """A data root holding ``CT.nii.gz``: the oblique phantom of runtime_data."""
    from runtime_data import oblique_lps_affine, phantom, write_nifti

    root = tmp_path / "data"
    root.mkdir()
    write_nifti(root / "CT.nii.gz", phantom(0), oblique_lps_affine())
    return root


@pytest.fixture(scope="session")
def slide_root(tmp_path_factory):
    """A data root with two slides (the regions slide and a small plain one) and a non-slide .tif."""
    import numpy as np
    from pathology_slides import DOWNSAMPLES, MPP, SLIDE_SIZE, paint_regions

    from MedOpenClawLib.pathology.pyramid_tiff import write_pyramidal_tiff

    root = tmp_path_factory.mktemp("wsi_root")
    case = root / "case_regions"
    case.mkdir()
    write_pyramidal_tiff(case / "regions.tif", *SLIDE_SIZE, paint_regions, DOWNSAMPLES, tile=256, mpp=MPP)
    other = root / "case_plain"
    other.mkdir()
    write_pyramidal_tiff(
        other / "plain.tif", 1500, 1000, lambda ds, x, y, w, h: np.full((h, w, 3), 128, np.uint8), (1, 4), mpp=None
    )
    (root / "not_a_slide.tif").write_text("this is not a TIFF")
    return root


@pytest.fixture(scope="session")
def slide_path(slide_root) -> str:
    """The regions slide of ``slide_root`` (pathology_slides.REGIONS on a textured background)."""
    return str(slide_root / "case_regions" / "regions.tif")


@pytest.fixture()
def qt_application():
    """The process's QApplication for the offscreen widget tests (gui, copilot)."""
    from gui_helpers import start_qt_application

    return start_qt_application()


@pytest.fixture()
def slicer_session(tmp_path):
    """A registry over a fresh headless scene with gui_helpers' two-volume case (``tmp_path/data/case1``) opened by
    the clinician, its trace saving images (``tmp_path/session/trace.jsonl``)."""
    from gui_helpers import open_slicer_session

    return open_slicer_session(tmp_path)


@pytest.fixture(scope="session")
def warm_pool(tmp_path_factory):
    """The test process's pool of warm headless workers (warm_workers.WarmPool), ended with the session."""
    from warm_workers import WarmPool

    pool = WarmPool(tmp_path_factory.mktemp("warm-workers"))
    yield pool
    pool.shut_down()


@pytest.fixture(scope="module")
def warm_workers(warm_pool):
    """The module's runs in this process (the runner's, and ``bench run`` typed through ``cli.main``) launch
    their local workers from ``warm_pool`` (for the modules whose runs test what happens around the worker, not its
    start: the bench runners, the providers' surfaces); subprocess runs start their own as ever."""
    from MedOpenClawLib.bench import executors

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(executors, "local_worker", warm_pool.local_worker)
        yield warm_pool


@pytest.fixture(scope="session")
def node_clients():
    """The folder of the Node.js clients this project did not write (Ajv, the TypeScript MCP SDK, the MCP
    Inspector), their pinned packages installed (server/node/package-lock.json; scripts/setup_env.sh runs ``npm
    ci`` there, and so does this fixture when they are missing). Skips, saying why, without Node.js or when the
    packages cannot be installed."""
    import shutil
    import subprocess
    from pathlib import Path

    node = Path(__file__).resolve().parent / "server" / "node"
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed: the checks with Ajv, the TypeScript MCP SDK and the MCP Inspector "
                    "need node (>= 20)")
    wanted = ("ajv", "@modelcontextprotocol/sdk", "@modelcontextprotocol/inspector")
    if not all((node / "node_modules" / name / "package.json").is_file() for name in wanted):
        if shutil.which("npm") is None:
            pytest.skip(f"the Node.js packages of {node} are not installed and npm is missing: npm ci --prefix {node}")
        installed = subprocess.run(["npm", "ci", "--prefix", str(node), "--no-audit", "--no-fund", "--ignore-scripts"],
                                   capture_output=True, text=True, timeout=300)
        if installed.returncode != 0:
            pytest.skip(f"npm ci --prefix {node} failed (offline?): {installed.stderr.strip()[-300:]}")
    return node

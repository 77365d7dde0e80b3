"""scripts/verify_in_slicer.py (the maintainer's checks inside the real 3D Slicer) run against the application
double, so the script itself is known to work before a maintainer runs it in Slicer."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import slicer_app_double

ROOT = Path(__file__).resolve().parents[3]


def load_script():
    spec = importlib.util.spec_from_file_location("verify_in_slicer", ROOT / "scripts" / "verify_in_slicer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shift_matrix(shift) -> np.ndarray:
    matrix = np.eye(4)
    matrix[:3, 3] = shift
    return matrix


@pytest.mark.parametrize("main_window", [False, True])
def test_the_verification_checks_pass_on_the_application_double(main_window, monkeypatch, tmp_path):
    from MedOpenClawLib.gui.qt_compat import qt
    from MedOpenClawLib.worker import service as worker

    app = slicer_app_double.install(monkeypatch, main_window=main_window)
    monkeypatch.setitem(sys.modules, "qt", qt)  # PythonQt's module inside Slicer; QSize is all the script uses
    monkeypatch.setattr(worker, "_SLICER_APP", [])
    slicer_app_double.install_modules(monkeypatch, app, tmp_path / "home")
    script = load_script()
    slicer_app_double.brains_modules(app, matrix=shift_matrix(-script.SHIFT_MM))
    checks = [script.check_app_binding, script.check_registry, script.check_bench_worker, script.check_view_resize,
              script.check_brainsfit, script.check_dependencies]
    try:
        if main_window:
            for check in [*checks, script.check_module_tests]:
                detail = check(tmp_path / check.__name__)
                assert detail, check.__name__
                app.scene.Clear(0)
        else:  # the checks as the script's own run makes them, each once: the two of the main window skip
            results = {result["check"]: result for result in script.run_checks(tmp_path / "all")}
            for check in checks:
                result = results[check.__name__.removeprefix("check_")]
                assert result["status"] == "PASS" and result["detail"], result
            assert results["module_tests"]["status"] == results["copilot_panel"]["status"] == "SKIP"
            assert "FAIL" not in {result["status"] for result in results.values()}, results
    finally:
        if worker._SLICER_APP:
            worker._SLICER_APP[0].close()
        app.close()

"""The extension's own module tests (MedOpenClawTest, MedCopilotTest) run as the build farm's ctest runs them:
``slicer_add_python_unittest`` (CMake/SlicerMacroPythonTesting.cmake) -> ``slicer.testing.runUnitTest`` ->
``unittest.TestLoader().loadTestsFromName(<module>)``, against the Slicer application double, under whatever Python
runs this file -- with scripts/check_slicer_release.py that is the Python and bundled packages of each supported
Slicer release."""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import tempfile
import types
from pathlib import Path

import pytest
import slicer
import slicer_app_double

ROOT = Path(__file__).resolve().parents[3]
# the core feature's packages that no Slicer release bundles (Testing/SlicerReleases/): absent on first use
NOT_BUNDLED = ("jsonschema", "nibabel")


@pytest.fixture()
def modules(monkeypatch, tmp_path):
    """The two scripted modules imported as Slicer imports them, inside the application double."""
    app = slicer_app_double.install(monkeypatch, main_window=True)
    slicer_app_double.install_modules(monkeypatch, app, tmp_path)
    yield importlib.import_module("MedOpenClaw"), importlib.import_module("MedCopilot")
    app.close()


@pytest.fixture()
def temporary(monkeypatch, tmp_path):
    """The temporary directory the module tests write into (their volume's folder)."""
    folder = tmp_path / "temporary"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def run_as_ctest(module: str) -> None:
    """``py_<module>``'s command line: ``slicer.testing.runUnitTest([binary dir, source dir], '<module>')``."""
    slicer.testing.runUnitTest([str(ROOT / module)], module)


@pytest.mark.parametrize("module", ["MedOpenClaw", "MedCopilot"])
def test_module_test_passes_and_leaves_no_temporary_folder(modules, temporary, module):
    run_as_ctest(module)
    assert list(temporary.iterdir()) == []


def test_a_module_test_fails_where_the_app_fails(modules, monkeypatch):
    """Not a test that cannot fail: the module test sees what the application does (here a save that fails)."""
    monkeypatch.setattr(slicer_app_double.CoreIOManager, "WRITERS", {})
    with pytest.raises(Exception):  # noqa: B017 - slicer.testing.exitFailure raises a plain Exception
        run_as_ctest("MedOpenClaw")


def test_reload_and_test_runs_the_same_tests(modules, temporary):
    """The module panel's "Reload and Test" (ScriptedLoadableModule.runTest -> the test class's base runTest)."""
    medopenclaw, _ = modules
    medopenclaw.MedOpenClaw(types.SimpleNamespace()).runTest(msec=0)
    assert list(temporary.iterdir()) == []  # the base class's runTest never calls doCleanups


class NotInstalled(importlib.abc.MetaPathFinder):
    """A fresh Slicer's Python: ``names`` cannot be imported until the pip double installs them."""

    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


@pytest.fixture()
def fresh_python(monkeypatch):
    """The core packages missing (and forgotten where already imported), and ``slicer.util.pip_install`` as a
    double that installs them (it records its calls; the real one runs pip in Slicer's Python)."""
    finder, installs = NotInstalled(NOT_BUNDLED), []
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    for name in [name for name in sys.modules if name.split(".")[0] in NOT_BUNDLED]:
        monkeypatch.delitem(sys.modules, name)

    def pip_install(requirements):
        installs.append(requirements)
        finder.names -= {requirement.split(">")[0].split("=")[0].strip() for requirement in requirements}

    monkeypatch.setattr(slicer.util, "pip_install", pip_install)
    return installs


@pytest.mark.parametrize("module", ["MedOpenClaw", "MedCopilot"])
def test_the_module_test_installs_its_packages_before_it_needs_them(modules, fresh_python, module):
    """On a fresh Slicer Python (no package imported yet, jsonschema and nibabel absent) ctest's run installs them
    once, in setUpClass, before any test method imports them."""
    run_as_ctest(module)
    assert len(fresh_python) == 1 and {"jsonschema", "nibabel"} <= {r.split(">")[0] for r in fresh_python[0]}


def test_without_the_install_the_module_test_fails_on_the_missing_package(modules, fresh_python, monkeypatch):
    """The fresh Python is real: with the install skipped the module test fails on the missing package."""
    monkeypatch.setattr(slicer.util, "pip_install", lambda requirements: None)
    with pytest.raises(Exception):  # noqa: B017 - slicer.testing.exitFailure raises a plain Exception
        run_as_ctest("MedOpenClaw")


def test_under_testing_the_dialog_installs_nothing(fresh_python, modules, caplog):
    """``confirmOkCancelDisplay`` answers OK by itself under ``--testing``: the module must not take that as consent."""
    medopenclaw, _ = modules
    assert medopenclaw.MedOpenClawLogic().ensureDependencies(askUser=True) is False
    assert fresh_python == [] and "without asking (--testing)" in caplog.text

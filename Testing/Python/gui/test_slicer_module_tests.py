"""The extension's own module tests (MedOpenClawTest, MedCopilotTest: what ``Slicer --testing`` runs on the
build farm) against the Slicer application double, under whatever Python runs this file -- with
scripts/check_slicer_release.py that is the Python and bundled packages of each supported Slicer release."""

from __future__ import annotations

import importlib

import pytest
import slicer_app_double


@pytest.fixture()
def modules(monkeypatch, tmp_path):
    """The two scripted modules imported as Slicer imports them, inside the application double."""
    app = slicer_app_double.install(monkeypatch, main_window=True)
    slicer_app_double.install_modules(monkeypatch, app, tmp_path)
    yield importlib.import_module("MedOpenClaw"), importlib.import_module("MedCopilot")
    app.close()


def test_medopenclaw_module_test_passes(modules):
    medopenclaw, _ = modules
    medopenclaw.MedOpenClawTest().runTest()


def test_medcopilot_module_test_passes(modules):
    _, medcopilot = modules
    medcopilot.MedCopilotTest().runTest()


def test_a_module_test_fails_where_the_app_fails(modules, monkeypatch):
    """Not a test that cannot fail: the module test sees what the application does (here a save that fails)."""
    medopenclaw, _ = modules
    monkeypatch.setattr(slicer_app_double.CoreIOManager, "WRITERS", {})
    with pytest.raises(AssertionError):
        medopenclaw.MedOpenClawTest().runTest()

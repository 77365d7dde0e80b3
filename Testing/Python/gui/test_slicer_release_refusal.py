"""On a 3D Slicer older than the supported releases (5.6/5.8, Python 3.9) the modules refuse at load with one
line naming the release needed; from 5.10 on they load. Runs under every release's Python (no slicer-core, no
PySide6 needed): ``slicer`` is a stand-in application exposing only its version (qSlicerCoreApplication's
``majorVersion``/``minorVersion`` properties, Base/QTCore/qSlicerCoreApplication.h)."""

from __future__ import annotations

import importlib
import logging
import sys
import types
from pathlib import Path

import pytest
from slicer_scripted_module_double import scripted_module_double

ROOT = Path(__file__).resolve().parents[3]


def load_modules(monkeypatch, major: int, minor: int):
    slicer = types.ModuleType("slicer")
    slicer.app = types.SimpleNamespace(majorVersion=major, minorVersion=minor)
    scripted = scripted_module_double()
    slicer.ScriptedLoadableModule = scripted
    for name, module in (("slicer", slicer), ("qt", types.ModuleType("qt")), (scripted.__name__, scripted)):
        monkeypatch.setitem(sys.modules, name, module)
    for folder in ("MedOpenClaw", "MedCopilot"):
        monkeypatch.syspath_prepend(str(ROOT / folder))
        monkeypatch.delitem(sys.modules, folder, raising=False)
    return importlib.import_module("MedOpenClaw"), importlib.import_module("MedCopilot")


@pytest.mark.parametrize("release", [(5, 6), (5, 8), (4, 11)])
def test_older_slicer_is_refused_with_one_line(monkeypatch, caplog, release):
    medopenclaw, medcopilot = load_modules(monkeypatch, *release)
    for module_class in (medopenclaw.MedOpenClaw, medcopilot.MedCopilot):
        caplog.clear()
        parent = types.SimpleNamespace(hidden=False)
        with caplog.at_level(logging.ERROR):
            module_class(parent)
        assert parent.hidden
        [record] = caplog.records
        line = record.getMessage()
        assert "\n" not in line and "3D Slicer 5.10 or later" in line and f"{release[0]}.{release[1]}" in line
        assert parent.helpText == line


@pytest.mark.parametrize("release", [(5, 10), (5, 11), (6, 0)])
def test_supported_slicer_loads_the_modules(monkeypatch, caplog, release):
    medopenclaw, medcopilot = load_modules(monkeypatch, *release)
    for module_class in (medopenclaw.MedOpenClaw, medcopilot.MedCopilot):
        parent = types.SimpleNamespace(hidden=False)
        with caplog.at_level(logging.ERROR):
            module_class(parent)
        assert not parent.hidden and not caplog.records and parent.title == module_class.__name__

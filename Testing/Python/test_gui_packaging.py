"""Extension packaging: the Extensions Index entry and the CMake metadata agree, the module scripts pass the
scripted-module contract check, and the first-use dependency check reads the module's requirements."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from MedOpenClawLib.gui.dependencies import import_name, missing_requirements, read_requirements

ROOT = Path(__file__).resolve().parents[2]
CMAKE = (ROOT / "CMakeLists.txt").read_text()


def cmake_value(name: str) -> str:
    return re.search(rf'set\({name}\s+"([^"]+)"\)', CMAKE).group(1)


def test_catalog_entry_matches_the_cmake_metadata():
    entry_path = ROOT / "ExtensionsIndex" / "MedOpenClaw.json"
    assert b"\r" not in entry_path.read_bytes()
    entry = json.loads(entry_path.read_text())
    assert set(entry) <= {"$schema", "category", "scm_url", "scm_revision", "scm_type", "build_dependencies",
                          "build_subdirectory", "enabled", "tier"}
    assert entry["$schema"].endswith("slicer-extension-catalog-entry-schema-v1.0.1.json#")
    assert re.search(r"project\(\s*([^\s)]+)", CMAKE).group(1) == entry_path.stem  # file name = project name
    assert entry["category"] == cmake_value("EXTENSION_CATEGORY")
    assert entry["scm_url"].removesuffix(".git") == cmake_value("EXTENSION_HOMEPAGE")
    assert entry["scm_url"].rsplit("/", 1)[1].startswith("Slicer") and 1 <= entry["tier"] <= 5


def test_icon_and_screenshot_urls_point_at_files_in_this_repository():
    for url in [cmake_value("EXTENSION_ICONURL"), *cmake_value("EXTENSION_SCREENSHOTURLS").split()]:
        relative = url.split("/main/", 1)[1]
        assert (ROOT / relative).is_file(), relative
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")


@pytest.mark.parametrize("module", ["MedOpenClaw", "MedCopilot"])
def test_module_scripts_follow_the_scripted_module_contract(module):
    scripts = [ROOT / module / f"{module}.py", *sorted((ROOT / module / f"{module}Lib").glob("*.py"))]
    checked = subprocess.run([sys.executable, str(ROOT / "CMake" / "check_scripted_module.py"), "--module", module,
                              *map(str, scripts)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr


def test_contract_check_reports_a_broken_module(tmp_path):
    broken = tmp_path / "Broken.py"
    broken.write_text("class Broken(ScriptedLoadableModule):\n    pass\nclass BrokenTest:\n    pass\n")
    checked = subprocess.run([sys.executable, str(ROOT / "CMake" / "check_scripted_module.py"), "--module",
                              "Broken", str(broken)], capture_output=True, text=True, check=False)
    assert checked.returncode == 1
    assert "BrokenWidget is missing" in checked.stderr and "does not derive from ScriptedLoadableModuleTest" in \
        checked.stderr


def test_dependency_check_reads_the_module_requirements():
    requirements = read_requirements(ROOT / "MedOpenClaw" / "Resources" / "requirements.txt")
    assert "jsonschema>=4.20" in requirements and all(not line.startswith("#") for line in requirements)
    assert [import_name(r) for r in ("pillow>=10", "Foo-Bar==1", "nibabel")] == ["PIL", "foo_bar", "nibabel"]
    assert missing_requirements(requirements) == []  # everything is installed in this environment
    assert missing_requirements(["surely-not-installed-pkg>=1"]) == ["surely-not-installed-pkg>=1"]
    with pytest.raises(ValueError):
        import_name("  >=1")

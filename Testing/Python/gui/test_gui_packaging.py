"""Extension packaging: the Extensions Index entry and the CMake metadata agree, the module scripts pass the
scripted-module contract check, and the per-feature dependencies: heavy packages imported
where used, missing ones answered as ``missing_dependency``, installs asked for, torch through PyTorchUtils."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from MedOpenClawLib.core import dependencies
from MedOpenClawLib.core.dependencies import FEATURES, import_name, install, missing_for, missing_requirements, require
from MedOpenClawLib.core.result import ActionError

ROOT = Path(__file__).resolve().parents[3]
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
        checked.stderr and "BrokenTest has no test* method" in checked.stderr


def test_feature_requirements_are_known_and_installed_here():
    assert [import_name(r) for r in ("pillow>=10", "Foo-Bar==1", "nibabel")] == ["PIL", "foo_bar", "nibabel"]
    assert missing_for(["core"]) == []  # installed in every test environment (also the Slicer release venvs)
    assert missing_requirements(["surely-not-installed-pkg>=1"]) == ["surely-not-installed-pkg>=1"]
    with pytest.raises(ValueError):
        import_name("  >=1")


def test_a_feature_without_its_packages_answers_missing_dependency(monkeypatch):
    monkeypatch.setattr(dependencies, "installed", lambda name: name != "highdicom")
    require("vista3d")
    with pytest.raises(ActionError) as refused:
        require("dicom_seg")
    needed = "highdicom" if sys.version_info >= (3, 10) else "needs Python 3.10"  # Slicer 5.6/5.8: Python 3.9
    assert refused.value.code == "missing_dependency" and needed in refused.value.message


def test_versions_are_read_once_and_afresh_after_an_install(monkeypatch):
    """A distribution's version is read once (Track B checks scipy's at every convex hull) until install() installs:
    then the upgraded version counts (pydicom 2.4.4, bundled by 3D Slicer 5.10, upgraded for DICOM SEG)."""
    versions, reads = {"pydicom": "2.4.4", "highdicom": "0.27.0"}, []
    monkeypatch.setattr(dependencies.importlib.metadata, "version", lambda name: reads.append(name) or versions[name])
    monkeypatch.setattr(dependencies, "installed", lambda name: name != "torch")  # nothing to pin
    monkeypatch.setattr(dependencies, "MIN_PYTHON", {})
    dependencies._distribution_version.cache_clear()  # forgets the real versions, then the fake ones after
    try:
        assert missing_for(["dicom_seg"]) == missing_for(["dicom_seg"]) == ["pydicom>=3.0.1"]
        assert sorted(reads) == ["highdicom", "pydicom"]
        assert install(["dicom_seg"], lambda missing: True, lambda arguments: versions.update(pydicom="3.0.2")) == []
    finally:
        dependencies._distribution_version.cache_clear()


class PyTorchUtilsDouble:
    """SlicerPyTorch's PyTorchUtils/PyTorchUtils.py: ``installTorch(askConfirmation=False,
    forceComputationBackend=None, torchVersionRequirement=None)`` asks the user, returns None when declined (no
    torch installed) and the imported ``torch`` module once light-the-torch installed it."""

    calls: list = []
    accept = True
    present: dict = {}  # torch and monai as the test's Slicer has them: name -> installed version

    class PyTorchUtilsLogic:
        def installTorch(self, askConfirmation=False, forceComputationBackend=None, torchVersionRequirement=None):
            PyTorchUtilsDouble.calls.append((askConfirmation, torchVersionRequirement))
            if not PyTorchUtilsDouble.accept:
                return None
            PyTorchUtilsDouble.present["torch"] = "2.4.1+cu121"  # the wheel light-the-torch matched to the driver
            return object()  # the imported torch module


@pytest.fixture()
def fresh_slicer(monkeypatch):
    """A Slicer without torch and monai (whatever this test environment has): the test's pip double and
    PyTorchUtils add them when they install."""
    PyTorchUtilsDouble.calls, PyTorchUtilsDouble.accept, PyTorchUtilsDouble.present = [], True, {}
    present = PyTorchUtilsDouble.present
    real_installed, real_version = dependencies.installed, dependencies.installed_version
    monkeypatch.setattr(dependencies, "installed", lambda name: name in present if name in {"torch", "monai"}
                        else real_installed(name))
    monkeypatch.setattr(dependencies, "installed_version", lambda requirement: present.get(
        dependencies.requirement_name(requirement)) if requirement.startswith(("torch", "monai"))
        else real_version(requirement))
    pip = []

    def pip_install(arguments):
        """slicer.util.pip_install: the requirements, and a constraints file's content when one is passed."""
        if "--constraint" in arguments:
            arguments = [*arguments[:-2], Path(arguments[-1]).read_text().strip()]
        pip.append(arguments)
        for argument in arguments:
            if "==" not in argument:  # PyPI's newest that the requirement (and constraint) allow
                present[dependencies.requirement_name(argument)] = "2.5.1" if argument.startswith("torch") else "1.4.0"

    return pip, pip_install


def test_install_asks_first_and_takes_torch_through_pytorchutils(fresh_slicer):
    pip, pip_install = fresh_slicer
    asked = []
    assert install(["vista3d"], lambda missing: asked.append(missing) or False, pip_install) == list(
        FEATURES["vista3d"])
    assert asked == [list(FEATURES["vista3d"])] and pip == [], "nothing is installed without the user's consent"

    assert install(["vista3d"], lambda missing: True, pip_install, find_module=lambda name: PyTorchUtilsDouble) == []
    assert PyTorchUtilsDouble.calls == [(True, ">=2.2")]
    assert pip == [["monai>=1.4", "torch==2.4.1+cu121"]], "monai is installed against the torch that is there"


def test_declining_torch_installs_nothing_that_would_pull_it(fresh_slicer):
    pip, pip_install = fresh_slicer
    PyTorchUtilsDouble.accept = False
    missing = install(["vista3d"], lambda missing: True, pip_install, find_module=lambda name: PyTorchUtilsDouble)
    assert PyTorchUtilsDouble.calls == [(True, ">=2.2")] and pip == [] and missing == list(FEATURES["vista3d"])


def test_without_pytorchutils_torch_comes_first_then_its_dependents(fresh_slicer):
    pip, pip_install = fresh_slicer
    assert install(["vista3d"], lambda missing: True, pip_install, find_module=lambda name: None) == []
    assert pip == [["torch>=2.2"], ["monai>=1.4", "torch==2.5.1"]]


def test_a_torch_too_old_is_missing_and_never_replaced(fresh_slicer):
    pip, pip_install = fresh_slicer
    PyTorchUtilsDouble.present["torch"] = "2.1.2+cu118"
    assert missing_for(["vista3d"]) == list(FEATURES["vista3d"])
    with pytest.raises(ActionError) as refused:
        require("vista3d")
    assert "torch>=2.2 (2.1.2+cu118 is installed)" in refused.value.message
    install(["vista3d"], lambda missing: True, pip_install, find_module=lambda name: PyTorchUtilsDouble)
    assert PyTorchUtilsDouble.calls == [] and pip == [], "a driver-matched torch is not replaced behind the user"


def test_a_feature_needing_a_newer_python_is_refused_and_not_installed(monkeypatch):
    monkeypatch.setattr(dependencies, "MIN_PYTHON", {"dicom_seg": (99, 0)})
    with pytest.raises(ActionError) as refused:
        require("dicom_seg")
    assert refused.value.code == "missing_dependency" and "needs Python 99.0 or later" in refused.value.message
    pip = []
    monkeypatch.setattr(dependencies, "installed", lambda name: name != "highdicom")
    assert install(["dicom_seg"], lambda missing: True, pip.append) == [] and pip == []


BLOCKED = """
import importlib.abc, json, sys
BLOCKED = {"highdicom", "torch", "monai", "scipy"}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, Block())
from MedOpenClawLib.apps.radiology import build_slicer_registry
registry = build_slicer_registry([], track="B")
results = {name: registry.call(name, arguments).error for name, arguments in (
    ("export_dicom_seg", {"segmentation_name": "x"}),
    ("import_dicom_seg", {"path": "/x.dcm", "volume_name": "x"}),
    ("vista3d_segment", {"label_prompt": ["liver"]}))}
results["imported"] = sorted(BLOCKED & set(sys.modules))
results["tools"] = len(registry.actions())
print(json.dumps(results))
"""


def test_track_b_loads_without_highdicom_torch_monai_scipy():
    """What a fresh Slicer has: the Track B tools are offered, and the ones that need a missing package say so."""
    ran = subprocess.run([sys.executable, "-c", BLOCKED], capture_output=True, text=True, check=False, timeout=120,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "MedOpenClaw")})
    assert ran.returncode == 0, ran.stderr[-2000:]
    results = json.loads(ran.stdout.strip().splitlines()[-1])
    assert results["imported"] == [] and results["tools"] > 20
    for name in ("export_dicom_seg", "import_dicom_seg", "vista3d_segment"):
        assert results[name]["code"] == "missing_dependency", results[name]
    assert "highdicom" in results["import_dicom_seg"]["message"] and "torch" in results["vista3d_segment"]["message"]

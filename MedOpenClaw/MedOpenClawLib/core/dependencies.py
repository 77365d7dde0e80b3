"""The Python packages each feature needs beyond what 3D Slicer ships, and how they get installed there.

3D Slicer ships numpy, SimpleITK, pydicom, vtk and packaging (its SuperBuild/External_python-*.cmake files).
Everything else is listed here per feature and imported only where it is used, so a feature whose packages are
missing (or installed in a version it cannot use) answers ``missing_dependency`` (saying what to install) instead
of breaking the module at import. Inside Slicer the module offers to install a feature's packages only after the
user agrees; torch goes through SlicerPyTorch's ``PyTorchUtils`` when that extension is present, which picks the
wheel matching the GPU driver -- the pattern of SlicerTotalSegmentator (TotalSegmentator/TotalSegmentator.py,
``setupPythonRequirements``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from types import ModuleType

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from .result import ActionError

FEATURES: dict[str, tuple[str, ...]] = {
    # registry, rendering; the models' wire: the vendors' SDKs (the copilot's model calls)
    "core": ("jsonschema>=4.20", "nibabel>=5.2", "pillow>=10", "openai>=3.57", "anthropic>=2.15", "google-genai>=3.6",
             "httpx2>=2.16"),
    "track_b": ("scipy>=1.11",),  # quantification (convex-hull diameters)
    # export_dicom_seg / import_dicom_seg; the preview of 3D Slicer bundles highdicom 0.27.0, which is kept
    "dicom_seg": ("highdicom>=0.27", "pydicom>=3.0.1"),
    "vista3d": ("torch>=2.2", "monai>=1.4"),  # vista3d_segment
}
FEATURE_NAMES = {"core": "MedOpenClaw", "track_b": "Track B analysis operators", "dicom_seg": "DICOM SEG",
                 "vista3d": "VISTA3D segmentation"}
# features whose packages need a newer Python than 3D Slicer 5.6/5.8 ship (3.9.10): highdicom 0.23+ requires 3.10
MIN_PYTHON = {"dicom_seg": (3, 10)}
# Packages a feature needs in a newer version than a supported release bundles (Testing/SlicerReleases/), so that
# installing the feature upgrades Slicer's own copy -- the confirmation lists it ("pydicom>=3.0.1 (2.4.4 is
# installed)"). pydicom: highdicom 0.23 and later need pydicom 3, and Slicer 5.10 bundles 2.4.4; Slicer's own DICOM
# code runs on pydicom 3 unchanged (Slicer moved the bundled pydicom from 2.4.4 to 3.0.2 after 5.10 touching only
# SuperBuild files, commit 226e800166; 5.12 bundles 3.0.2).
BUNDLED_UPGRADES = {"pydicom": ("slicer-5.10",)}
# The oldest 3D Slicer the modules load in: 5.10, the previous stable (5.12 is the current stable; both Python
# 3.12.10, both tested: Testing/SlicerReleases/). 5.6/5.8 (Python 3.9.10) cannot be tested: the module tests run
# against the application double, built on slicer-core, which exists for Python 3.10 and later only.
MIN_SLICER = (5, 10)
IMPORT_NAMES = {"pillow": "PIL", "pyyaml": "yaml", "google-genai": "google.genai"}
REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)$")
TORCH = "torch"


def slicer_release_problem(major: int, minor: int) -> str | None:
    """One line saying that this 3D Slicer is older than :data:`MIN_SLICER`, or None when it is supported."""
    if (major, minor) >= MIN_SLICER:
        return None
    return (f"MedOpenClaw needs 3D Slicer {MIN_SLICER[0]}.{MIN_SLICER[1]} or later; this is 3D Slicer {major}.{minor} "
            f"(Python {sys.version_info[0]}.{sys.version_info[1]})")


def import_name(requirement: str) -> str:
    name = requirement_name(requirement)
    return IMPORT_NAMES.get(name, name.replace("-", "_").replace(".", "_"))


def requirement_name(requirement: str) -> str:
    """The distribution name of ``requirement`` (lower case), e.g. ``torch`` for ``torch>=2.2``."""
    match = REQUIREMENT_NAME.match(requirement)
    if match is None:
        raise ValueError(f"cannot read a package name from {requirement!r}")
    return match.group(1).lower()


def installed(module_name: str) -> bool:
    try:
        return importlib.util.find_spec(module_name) is not None
    except (ImportError, ValueError):  # a blocked or half-imported module counts as missing
        return False


def installed_version(requirement: str) -> str | None:
    """The installed version of ``requirement``'s distribution, or None when its metadata is absent."""
    return _distribution_version(requirement_name(requirement))


@functools.cache
def _distribution_version(name: str) -> str | None:
    """Read once per process until :func:`install` installs something: parsing a distribution's metadata costs
    tens of ms, and Track B's statistics check scipy's version at every convex hull."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def satisfied(requirement: str) -> bool:
    """Importable and, when the requirement names versions, installed in one of them: a torch older than the
    feature needs is as unusable as none (SlicerTotalSegmentator checks ``torch.__version__`` the same way)."""
    if not installed(import_name(requirement)):
        return False
    specifier = REQUIREMENT_NAME.match(requirement).group(2).strip()
    if not specifier:
        return True
    version = installed_version(requirement)
    return version is None or Version(version) in SpecifierSet(specifier)  # no metadata: a vendored copy


def missing_requirements(requirements) -> list[str]:
    return [requirement for requirement in requirements if not satisfied(requirement)]


def unsupported_python(feature: str) -> tuple[int, int] | None:
    """The Python a feature needs when the running one is older (its packages cannot be installed here)."""
    needed = MIN_PYTHON.get(feature)
    return needed if needed is not None and sys.version_info[:2] < needed else None


def missing_for(features) -> list[str]:
    """The requirements of ``features`` (names of :data:`FEATURES`) the running interpreter lacks, in order."""
    wanted = [requirement for feature in features for requirement in FEATURES[feature]]
    return missing_requirements(list(dict.fromkeys(wanted)))


def describe_missing(requirement: str) -> str:
    """``torch>=2.2`` or, when an unsuitable version is installed, ``torch>=2.2 (2.1.0 is installed)``."""
    version = installed_version(requirement) if installed(import_name(requirement)) else None
    return f"{requirement} ({version} is installed)" if version else requirement


def require(feature: str) -> None:
    """Refuse an action whose feature's packages are missing, with what to install (never an ImportError)."""
    needed = unsupported_python(feature)
    if needed is not None:
        raise ActionError("missing_dependency",
                          f"{FEATURE_NAMES[feature]} needs Python {needed[0]}.{needed[1]} or later (3D Slicer 5.10); "
                          f"this is Python {sys.version_info[0]}.{sys.version_info[1]}")
    missing = missing_for([feature])
    if missing:
        raise ActionError("missing_dependency",
                          f"{FEATURE_NAMES[feature]} needs the Python packages "
                          f"{', '.join(map(describe_missing, missing))}; install them from the MedOpenClaw module "
                          f"(it asks before installing) or with pip")


def install(features, confirm: Callable[[list[str]], bool], pip_install: Callable[[list[str]], None],
            find_module: Callable[[str], ModuleType | None] | None = None) -> list[str]:
    """Install what ``features`` lack once ``confirm(missing)`` agrees; returns what is still missing.

    The pattern of SlicerTotalSegmentator (TotalSegmentator/TotalSegmentator.py, ``setupPythonRequirements``):
    torch first, by SlicerPyTorch's ``PyTorchUtilsLogic().installTorch`` when ``PyTorchUtils`` is importable (it
    asks the user itself and chooses the wheel matching the GPU driver), by pip otherwise; nothing more when torch
    was declined or is still unsuitable; then the packages that depend on torch, constrained to the installed
    torch so that pip cannot replace it (``monai`` would pull the newest PyPI torch). Features whose packages need a
    newer Python (:data:`MIN_PYTHON`) are not attempted.
    """
    find_module = find_module or _find_module
    features = [feature for feature in features if unsupported_python(feature) is None]
    missing = missing_for(features)
    if not missing or not confirm(missing):
        return missing
    torch = [requirement for requirement in missing if requirement_name(requirement) == TORCH]
    torch_utils = find_module("PyTorchUtils") if torch else None
    if torch_utils is not None:
        # installTorch returns None when the user declines (PyTorchUtils/PyTorchUtils.py); it is not asked to
        # replace an installed torch, which may be the one matched to this machine's driver
        if installed(TORCH) or torch_utils.PyTorchUtilsLogic().installTorch(
                askConfirmation=True, torchVersionRequirement=torch[0][len(TORCH):] or None) is None:
            return missing_for(features)
    elif torch:
        pip_install(torch)
    # the versions read so far are forgotten: torch's is read again below, the others' once they are installed (and
    # torch stays pinned meanwhile)
    _distribution_version.cache_clear()
    if torch and missing_requirements(torch):
        return missing_for(features)  # declined, failed or too old: the dependents would pull their own torch
    rest = [requirement for requirement in missing if requirement not in torch]
    if rest:
        with torch_pinned() as constraint:
            pip_install([*rest, *constraint])
    return missing_for(features)


@contextlib.contextmanager
def torch_pinned() -> Iterator[list[str]]:
    """pip arguments that keep the installed torch while other packages are installed (none without torch)."""
    version = installed_version(TORCH) if installed(TORCH) else None
    if version is None:
        yield []
        return
    with tempfile.TemporaryDirectory(prefix="medopenclaw-pip-") as folder:
        path = os.path.join(folder, "constraints.txt")
        with open(path, "w", encoding="utf-8") as constraints:
            constraints.write(f"torch=={version}\n")
        yield ["--constraint", path]


def _find_module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None

"""The Python packages each feature needs beyond what 3D Slicer ships, and how they get installed there.

3D Slicer ships numpy, SimpleITK, pydicom and vtk. Everything else is listed here per feature and imported only
where it is used, so a feature whose packages are missing answers ``missing_dependency`` (saying what to
install) instead of breaking the module at import. Inside Slicer the module offers to install a feature's
packages only after the user agrees; torch goes through SlicerPyTorch's ``PyTorchUtils`` when that extension is
present, which picks the wheel matching the GPU driver -- the pattern of SlicerTotalSegmentator
(TotalSegmentator/TotalSegmentator.py, ``setupPythonRequirements``).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable
from types import ModuleType

from .result import ActionError

FEATURES: dict[str, tuple[str, ...]] = {
    "core": ("jsonschema>=4.20", "nibabel>=5.2", "pillow>=10", "requests>=2.31"),  # registry, rendering, models
    "track_b": ("scipy>=1.11",),  # quantification (convex-hull diameters)
    "dicom_seg": ("highdicom>=0.28",),  # export_dicom_seg / import_dicom_seg
    "vista3d": ("torch>=2.2", "monai>=1.4"),  # vista3d_segment
}
FEATURE_NAMES = {"core": "MedOpenClaw", "track_b": "Track B analysis operators", "dicom_seg": "DICOM SEG",
                 "vista3d": "VISTA3D segmentation"}
IMPORT_NAMES = {"pillow": "PIL", "pyyaml": "yaml"}
REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
TORCH = "torch"


def import_name(requirement: str) -> str:
    match = REQUIREMENT_NAME.match(requirement)
    if match is None:
        raise ValueError(f"cannot read a package name from {requirement!r}")
    name = match.group(1).lower()
    return IMPORT_NAMES.get(name, name.replace("-", "_").replace(".", "_"))


def installed(module_name: str) -> bool:
    try:
        return importlib.util.find_spec(module_name) is not None
    except (ImportError, ValueError):  # a blocked or half-imported module counts as missing
        return False


def missing_requirements(requirements) -> list[str]:
    return [requirement for requirement in requirements if not installed(import_name(requirement))]


def missing_for(features) -> list[str]:
    """The requirements of ``features`` (names of :data:`FEATURES`) the running interpreter lacks, in order."""
    wanted = [requirement for feature in features for requirement in FEATURES[feature]]
    return missing_requirements(list(dict.fromkeys(wanted)))


def require(feature: str) -> None:
    """Refuse an action whose feature's packages are missing, with what to install (never an ImportError)."""
    missing = missing_for([feature])
    if missing:
        raise ActionError("missing_dependency",
                          f"{FEATURE_NAMES[feature]} needs the Python packages {', '.join(missing)}; install them "
                          f"from the MedOpenClaw module (it asks before installing) or with pip")


def install(features, confirm: Callable[[list[str]], bool], pip_install: Callable[[list[str]], None],
            find_module: Callable[[str], ModuleType | None] | None = None) -> list[str]:
    """Install what ``features`` lack once ``confirm(missing)`` agrees; returns what is still missing.

    torch is installed by SlicerPyTorch's ``PyTorchUtilsLogic().installTorch`` when ``PyTorchUtils`` is importable
    (it asks the user itself and chooses the CUDA/CPU wheel), by pip otherwise.
    """
    find_module = find_module or _find_module
    missing = missing_for(features)
    if not missing or not confirm(missing):
        return missing
    torch = [requirement for requirement in missing if import_name(requirement) == TORCH]
    torch_utils = find_module("PyTorchUtils") if torch else None
    if torch_utils is not None:
        logic = torch_utils.PyTorchUtilsLogic()
        if not logic.torchInstalled():
            logic.installTorch(askConfirmation=True, torchVersionRequirement=torch[0][len(TORCH):] or None)
        missing = [requirement for requirement in missing if requirement not in torch]
    if missing:
        pip_install(missing)
    return missing_for(features)


def _find_module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None

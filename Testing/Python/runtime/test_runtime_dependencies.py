"""The per-feature packages the Slicer module installs on demand (dependencies.FEATURES) and pyproject.toml's
requirements are one list: an optional feature is a pyproject extra of the same name with the same packages,
and every other feature's packages are hard requirements, at versions the feature accepts. Against each
supported 3D Slicer release's bundled packages (Testing/SlicerReleases/, read from its SuperBuild files) a
feature's requirement either accepts the bundled version or is a declared upgrade of it."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

from MedOpenClawLib.core.dependencies import BUNDLED_UPGRADES, FEATURES, MIN_PYTHON

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]


def _by_name(requirements) -> dict[str, Requirement]:
    parsed = [Requirement(text) for text in requirements]
    return {re.sub(r"[-_.]+", "-", requirement.name).lower(): requirement for requirement in parsed}


def _accepted(feature_requirement: str, pinned: Requirement) -> bool:
    """Whether the version pyproject pins satisfies the feature's own bound."""
    wanted = Requirement(feature_requirement)
    versions = [spec.version for spec in pinned.specifier if spec.operator == "=="]
    return all(wanted.specifier.contains(version, prereleases=True) for version in versions)


def test_optional_features_are_the_extras_of_the_same_name():
    extras = PROJECT["optional-dependencies"]
    hard = _by_name(PROJECT["dependencies"])
    for feature, requirements in FEATURES.items():
        names = set(_by_name(requirements))
        if feature in extras:
            extra = _by_name(extras[feature])
            assert names == set(extra), feature
            assert not names & set(hard), f"{feature}: optional packages are also hard requirements"
            source = extra
        else:
            assert names <= set(hard), f"{feature}: {sorted(names - set(hard))} are neither an extra nor required"
            source = hard
        for requirement in requirements:
            name = re.sub(r"[-_.]+", "-", Requirement(requirement).name).lower()
            assert _accepted(requirement, source[name]), f"{feature}: pyproject's {source[name]} vs {requirement}"


def test_torch_and_monai_are_optional():
    hard = _by_name(PROJECT["dependencies"])
    assert "torch" not in hard and "monai" not in hard
    assert {"torch", "monai"} <= set(_by_name(PROJECT["optional-dependencies"]["vista3d"]))


def bundled(release_file: Path) -> dict[str, str]:
    """Distribution name -> version of what a release bundles (the lines citing a SuperBuild External_ file)."""
    found = {}
    for line in release_file.read_text(encoding="utf-8").splitlines():
        requirement, _, comment = line.partition("#")
        if "==" in requirement and "External_" in comment:
            pinned = Requirement(requirement.strip())
            found[re.sub(r"[-_.]+", "-", pinned.name).lower()] = next(iter(pinned.specifier)).version
    return found


RELEASE_FILES = sorted((ROOT / "Testing" / "SlicerReleases").glob("slicer-*.txt"))
RELEASES = {path.stem: bundled(path) for path in RELEASE_FILES}
PYTHONS = {path.stem: tuple(map(int, re.search(r"^# python: (\d+)\.(\d+)", path.read_text(encoding="utf-8"),
                                                re.M).groups())) for path in RELEASE_FILES}


def test_features_accept_what_each_release_bundles_or_declare_the_upgrade():
    assert {"slicer-5.10", "slicer-5.12", "slicer-preview"} <= set(RELEASES) and all(RELEASES.values())
    upgrades = set()
    for feature, requirements in FEATURES.items():
        for requirement in map(Requirement, requirements):
            name = re.sub(r"[-_.]+", "-", requirement.name).lower()
            for release, packages in RELEASES.items():
                if PYTHONS[release] < MIN_PYTHON.get(feature, (0, 0)):
                    continue  # never installed there (dependencies.unsupported_python)
                if name in packages and not requirement.specifier.contains(packages[name], prereleases=True):
                    upgrades.add((name, release))
                    assert release in BUNDLED_UPGRADES.get(name, ()), (
                        f"{feature}: {requirement} would replace {release}'s bundled {name} {packages[name]}")
    declared = {(name, release) for name, releases in BUNDLED_UPGRADES.items() for release in releases}
    assert declared == upgrades, f"stale BUNDLED_UPGRADES entries: {declared - upgrades}"


def test_a_features_packages_name_what_they_need_of_the_bundled_ones():
    """highdicom needs pydicom 3, newer than Slicer 5.10 bundles: the feature says so itself, so the install dialog
    shows that Slicer's pydicom is upgraded and the test above checks it (pip would do it unannounced)."""
    declared = _by_name(FEATURES["dicom_seg"])
    for dependency in map(Requirement, importlib.metadata.requires("highdicom") or []):
        name = re.sub(r"[-_.]+", "-", dependency.name).lower()
        older = [release for release, packages in RELEASES.items()
                 if name in packages and not dependency.specifier.contains(packages[name], prereleases=True)]
        if dependency.marker is None and older:
            assert name in declared, f"highdicom needs {dependency}; dicom_seg does not declare it"
            needed = [spec.version for spec in dependency.specifier if spec.operator == ">="]
            assert all(declared[name].specifier.contains(version) for version in needed), (declared[name], dependency)

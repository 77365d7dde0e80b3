"""The per-feature packages the Slicer module installs on demand (dependencies.FEATURES) and pyproject.toml's
requirements are one list: an optional feature is a pyproject extra of the same name with the same packages,
and every other feature's packages are hard requirements, at versions the feature accepts."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

from MedOpenClawLib.dependencies import FEATURES

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text(encoding="utf-8"))
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

"""The MedFlow-Bench modules, one :class:`~.spec.ModuleSpec` per file, registered in :data:`REGISTRY`.

Adding a module = one spec file here plus its loader (and synthetic writer, parser, scoring rule, prompts),
and one line in :data:`REGISTRY`; ``Testing/Python/bench/modules/test_bench_modules.py`` checks that the spec
is complete.
Spec files are imported on first use, so listing names (argparse choices, package checks) stays cheap.
"""

from __future__ import annotations

import importlib

from ..cases import CaseFormatError
from .spec import APPLICATIONS, PATHOLOGY, RADIOLOGY, ModuleSpec, SubMetric

# module name -> the file below that defines its SPEC; this order is the report's column order
REGISTRY = {
    "lumiere": "lumiere",
    "ucsf-pdgm": "ucsf_pdgm",
    "nsclc": "nsclc",
    "bracs": "bracs",
    "camelyon17": "camelyon17",
}


class UnknownModule(CaseFormatError):
    """A module name that no spec defines."""


def names() -> tuple[str, ...]:
    """Every registered module, in report order."""
    return tuple(REGISTRY)


def get(name: str) -> ModuleSpec:
    """The spec of module ``name``; :class:`UnknownModule` (a CaseFormatError) names the known ones."""
    if name not in REGISTRY:
        raise UnknownModule(f"unknown module {name!r}; expected one of {', '.join(REGISTRY)}")
    spec = importlib.import_module(f"{__name__}.{REGISTRY[name]}").SPEC
    if spec.name != name:
        raise UnknownModule(f"bench/modules/{REGISTRY[name]}.py defines {spec.name!r}, registered as {name!r}")
    return spec


def title(name: str) -> str:
    """The report title of module ``name`` ("Brain MRI"); the name itself for a module no spec defines (a run
    directory of an older or foreign package still gets a row)."""
    return get(name).title if name in REGISTRY else name


def specs() -> list[ModuleSpec]:
    return [get(name) for name in REGISTRY]


def of_application(application: str) -> tuple[str, ...]:
    """The modules whose cases open in ``application`` (RADIOLOGY or PATHOLOGY), in report order."""
    if application not in APPLICATIONS:
        raise ValueError(f"unknown application {application!r}; expected one of {', '.join(APPLICATIONS)}")
    return tuple(spec.name for spec in specs() if spec.application == application)


__all__ = ["PATHOLOGY", "RADIOLOGY", "REGISTRY", "ModuleSpec", "SubMetric", "UnknownModule", "get", "names",
           "of_application", "specs", "title"]

"""The MedFlow-Bench modules: one folder each (``modules/<name>/``: spec, loader, synthetic writer, labels, ...),
found by discovery.

A module folder's ``__init__.py`` names the module (``NAME``) and its column position in the report
(``REPORT_POSITION``) and imports nothing, so listing names (argparse choices, manifest checks) stays cheap; its
``spec.py`` defines ``SPEC`` (a :class:`~..spec.ModuleSpec`), imported when a command first asks for it. Adding a
module = adding its folder; ``Testing/Python/bench/modules/test_bench_modules.py`` checks that every spec is
complete. Commands look a spec up here once, where they start, and pass the ModuleSpec down.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from types import ModuleType

from ...core.applications import APPLICATIONS, PATHOLOGY, RADIOLOGY, check_application
from ..errors import CaseFormatError
from ..spec import ModuleSpec, SubMetric


class UnknownModule(CaseFormatError):
    """A module name that no module folder defines."""


@lru_cache(maxsize=1)
def _folders() -> dict[str, ModuleType]:
    """module name -> its folder's package, in report order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg:
            package = importlib.import_module(f"{__name__}.{info.name}")
            found.append((package.REPORT_POSITION, package.NAME, package))
    return {name: package for _, name, package in sorted(found, key=lambda item: (item[0], item[1]))}


def names() -> tuple[str, ...]:
    """Every module, in report order."""
    return tuple(_folders())


def prepare_options() -> list[tuple[str, str, dict]]:
    """(module, argparse dest, keywords) of every module's `bench prepare` loader flags (its folder's
    ``PREPARE_OPTIONS``), in report order: read without importing any spec."""
    return [(name, dest, dict(keywords)) for name, package in _folders().items()
            for dest, keywords in getattr(package, "PREPARE_OPTIONS", {}).items()]


def check_module(name: object) -> str:
    """``name`` when a module folder defines it, else UnknownModule (a CaseFormatError) naming the known ones."""
    if not isinstance(name, str) or name not in _folders():
        raise UnknownModule(f"unknown module {name!r}; expected one of {', '.join(names())}")
    return name


def get(name: str) -> ModuleSpec:
    """The spec of module ``name``; :class:`UnknownModule` (a CaseFormatError) names the known ones."""
    package = _folders()[check_module(name)]
    spec = importlib.import_module(f"{package.__name__}.spec").SPEC
    if spec.name != name:
        raise UnknownModule(f"{package.__name__}.spec defines {spec.name!r}, its folder names {name!r}")
    return spec


def known(name: object) -> ModuleSpec | None:
    """The spec of module ``name``, or None for a name no module folder defines (a foreign trace's header)."""
    return get(name) if isinstance(name, str) and name in _folders() else None


def title(name: str) -> str:
    """The report title of module ``name`` ("Brain MRI"); the name itself for a module no folder defines (a run
    directory of an older or foreign package still gets a row)."""
    spec = known(name)
    return spec.title if spec is not None else name


def specs() -> list[ModuleSpec]:
    return [get(name) for name in names()]


def of_application(application: str) -> tuple[str, ...]:
    """The modules whose cases open in ``application`` (RADIOLOGY or PATHOLOGY), in report order."""
    try:
        check_application(application)
    except ValueError:
        raise ValueError(f"unknown application {application!r}; expected one of {', '.join(APPLICATIONS)}") from None
    return tuple(spec.name for spec in specs() if spec.application == application)


def in_table(table: str) -> tuple[str, ...]:
    """The modules whose spec joins the paper table ``table`` ("table1"), in report order."""
    return tuple(spec.name for spec in specs() if table in spec.tables)


__all__ = ["PATHOLOGY", "RADIOLOGY", "ModuleSpec", "SubMetric", "UnknownModule", "check_module", "get", "in_table",
           "known", "names", "of_application", "prepare_options", "specs", "title"]

"""What the audit needs to know of a benchmark module: the ``audit`` field of its spec (``bench/modules``).

- ``evidence``: which answer fields carry spatial evidence -- ``radiology`` (key slices in canonical RAS mm and a
  RAS point), ``pathology`` (level-0 WSI localizations) or ``none`` (LUMIERE's yes/no evidence fields);
- ``timepoint``: the study a volume name belongs to. LUMIERE compares an OLD and a CURRENT study (its volumes are
  named ``OLD_*`` / ``CURRENT_*``); every other radiology module is one study, so its question compares no
  timepoints;
- ``workflow``: the module's Track B advanced-operation workflow (``milestones.WORKFLOWS``), or None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

SINGLE_STUDY = "study"
LUMIERE_STUDIES = ("OLD", "CURRENT")


def lumiere_timepoint(name: str) -> str | None:
    """``OLD`` or ``CURRENT`` from a LUMIERE volume name (also a derived one, e.g. ``CURRENT_CT1 resampled``)."""
    prefix = str(name).split("_", 1)[0].upper()
    return prefix if prefix in LUMIERE_STUDIES else None


def single_study(name: str) -> str:
    return SINGLE_STUDY


@dataclass(frozen=True)
class AuditSpec:
    evidence: str
    timepoint: Callable[[str], str | None]
    workflow: str | None = None

    @property
    def compares_timepoints(self) -> bool:
        return self.timepoint is not single_study


GENERIC = AuditSpec("radiology", single_study)  # an unknown module: the generic rules only

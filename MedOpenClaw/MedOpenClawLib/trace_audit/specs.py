"""What the audit needs to know of a benchmark module: the ``audit`` field of its spec (``bench/modules``).

- ``evidence``: which answer fields carry spatial evidence -- ``radiology`` (key slices in canonical RAS mm and a
  RAS point), ``pathology`` (level-0 WSI localizations) or ``none`` (yes/no evidence fields);
- ``timepoint``: the study a volume name belongs to, declared by the module (one comparing an old and a current
  study names them from its volume names); :func:`single_study` for a module of one study, whose question
  compares no timepoints;
- ``workflow``: the module's Track B advanced-operation workflow (``milestones.WORKFLOWS``), or None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

SINGLE_STUDY = "study"
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

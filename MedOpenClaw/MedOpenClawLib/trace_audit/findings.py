"""What the trace audit reports: findings (one failure, with the records that show it) and their codes.

Codes follow MedFlow-Bench's failure analysis (Section 6, Appendix G):

- ``EV``: a spatial evidence field of the answer (key slice, RAS point, WSI coordinate) that nothing the agent saw
  or did grounds (Section 4's evidence-grounding bottleneck, found per field);
- ``F1``: registration objective drift -- a registration between volumes the question does not compare;
- ``F2``: pseudo-quantification -- a millimetre measurement, area or volume in the answer that no measuring
  operation produced;
- ``F3``: transform-layer misbinding -- a transform applied to a volume it was not estimated for, a fusion of
  volumes no registration aligns, or evidence recorded on a volume other than the one displayed;
- ``F4``: self-confirming segmentation -- a segmentation discarded for a later, disjoint one that was never checked
  against it;
- ``G5``: procedural instability -- an advanced-operation workflow begun but its milestone sequence not completed.

Severities: ``high`` (the cited evidence cannot be what the answer says it is), ``medium`` (the evidence chain has a
gap a reader must check), ``low`` (the procedure is incomplete; the answer may still be sound).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from .bounded import FINDINGS_KEPT

CODES = {
    "EV": "ungrounded spatial evidence",
    "F1": "registration objective drift",
    "F2": "pseudo-quantification",
    "F3": "transform-layer misbinding",
    "F4": "self-confirming segmentation",
    "G5": "incomplete advanced-operation workflow",
}
SEVERITIES = ("high", "medium", "low")


@dataclass(frozen=True)
class Finding:
    """One failure found in a trace: ``records`` are the ``seq`` numbers that show it, in trace order."""

    code: str
    rule: str  # the sub-rule that fired, e.g. ``F3.fusion_unregistered``
    severity: str
    records: tuple[int, ...]
    message: str

    def to_json(self) -> dict:
        item = asdict(self)
        item["records"] = list(self.records)
        return item


@dataclass
class FieldProvenance:
    """One evidence field of the parsed answer and what grounds it (``records``: the grounding seq numbers)."""

    field: str  # e.g. ``key_slice_axial_mm``, ``ras``, ``localizations[0]``, ``measurement[1]``
    value: object
    grounded: bool
    basis: str | None  # how: ``displayed``, ``conversion``, ``viewed_field``, ``measured``; None when ungrounded
    records: list[int] = field(default_factory=list)
    note: str = ""

    def to_json(self) -> dict:
        return asdict(self)


class Listed:
    """Findings in the order found, at most :data:`.bounded.FINDINGS_KEPT` of a rule: the rest are counted, and
    :meth:`findings` closes each such rule with one finding saying how many it does not list."""

    def __init__(self) -> None:
        self.kept: list[Finding] = []
        self.found: Counter = Counter()
        self.closing: dict[str, Finding] = {}  # rule -> a finding of it (code, severity) once one is left out

    def add(self, finding: Finding) -> None:
        self.found[finding.rule] += 1
        if self.found[finding.rule] <= FINDINGS_KEPT:
            self.kept.append(finding)
        else:
            self.closing.setdefault(finding.rule, finding)

    def count_more(self, finding: Finding, more: int) -> None:
        """``more`` findings like ``finding`` that were counted but never made (their records were not kept)."""
        if more > 0:
            self.found[finding.rule] += more
            self.closing.setdefault(finding.rule, finding)

    def findings(self, dropped_rules: frozenset[str] = frozenset()) -> list[Finding]:
        """The listed findings (those of ``dropped_rules`` left out), each capped rule closed by a count."""
        listed = [finding for finding in self.kept if finding.rule not in dropped_rules]
        for rule, like in self.closing.items():
            if rule not in dropped_rules:
                more = self.found[rule] - sum(finding.rule == rule for finding in self.kept)
                listed.append(Finding(like.code, rule, like.severity, (),
                                      f"{more} more {rule} findings are not listed: the audit lists the first "
                                      f"{FINDINGS_KEPT} of a rule"))
        return listed

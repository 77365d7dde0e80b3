"""Trace audit: MedFlow-Bench's failure modes and the provenance of every evidence field, found in an audit trace.

MedFlow-Bench claims that auditable traces expose what final answers hide; its paper shows it by reading a few
traces by hand (Section 6, Appendix G). This package does it for every episode, deterministically and from the trace
alone (no ground truth, no viewer): :func:`audit_records` returns

- ``provenance``: each evidence field of the parsed answer, grounded or not, with the records that ground it
  (:mod:`.provenance`);
- ``findings``: ``EV`` (ungrounded spatial evidence), ``F1``-``F4`` (:mod:`.detectors`, F2 from the provenance of
  measurements) and ``G5`` (:mod:`.milestones`), each with code, rule, severity, record numbers and a message;
- ``milestones``: the module's advanced-operation workflow milestones, and ``final_view`` / ``final_mask`` for
  stability across repeats (:func:`.milestones.stability`).

Per-module knowledge is handed in by the caller: a benchmark module's spec (:class:`ModuleKnowledge`; the bench's
``ModuleSpec`` is one) gives its ``audit`` field (a :class:`.specs.AuditSpec`) and its answer parser. This package
imports nothing of the bench. The rules are documented in each module's docstring and in ``docs/trace-audit.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from .detectors import detect
from .findings import CODES, SEVERITIES, FieldProvenance, Finding
from .milestones import final_mask, final_view, milestone_findings, milestones, stability
from .provenance import evidence_provenance
from .specs import GENERIC, AuditSpec
from .timeline import Timeline

__all__ = ["CODES", "SEVERITIES", "AuditReport", "FieldProvenance", "Finding", "ModuleKnowledge", "audit_records",
           "audit_timeline", "format_report", "stability", "summarize_audits"]
FORMAT = 1


class ModuleKnowledge(Protocol):
    """What the audit needs of a benchmark module: its name, its ``audit`` rules and its answer parser."""

    name: str
    audit: AuditSpec

    def read_answer(self, text: str | None) -> dict: ...


@dataclass
class AuditReport:
    module: str | None
    provenance: list[FieldProvenance] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    milestones: dict | None = None
    final_view: dict | None = None
    final_mask: dict | None = None

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "module": self.module,
            "findings": [finding.to_json() for finding in self.findings],
            "provenance": [item.to_json() for item in self.provenance],
            "grounded": sum(item.grounded for item in self.provenance),
            "ungrounded": sum(not item.grounded for item in self.provenance),
            "milestones": self.milestones,
            "final_view": self.final_view,
            "final_mask": self.final_mask,
        }


def _evidence_findings(timeline: Timeline, provenance: list[FieldProvenance]) -> list[Finding]:
    answer = (timeline.final_seq,) if timeline.final_seq is not None else ()
    findings = []
    for item in provenance:
        if item.grounded:
            continue
        if item.field.startswith("measurement"):
            value = item.value
            findings.append(Finding("F2", "F2.unmeasured", "high", answer,
                                    f"the answer reports a {value['kind']} of {value['label']}, which no "
                                    "measure_line or quantify call produced"))
        else:
            findings.append(Finding("EV", "EV.ungrounded", "medium", answer,
                                    f"{item.field} = {item.value}: {item.note}"))
    return findings


def audit_records(records: Iterable, module: ModuleKnowledge | None = None, parsed: dict | None = None) -> AuditReport:
    """Audit one episode's trace records under ``module``'s rules (the generic rules only without one);
    ``parsed`` is the parsed final answer (parsed from the trace's final text with the module's parser when
    omitted)."""
    return audit_timeline(Timeline(records), module, parsed)


def audit_timeline(timeline: Timeline, module: ModuleKnowledge | None = None,
                   parsed: dict | None = None) -> AuditReport:
    """:func:`audit_records` of a trace already read (its header names the module a caller looks up)."""
    spec = module.audit if module is not None else GENERIC
    if parsed is None:
        parsed = module.read_answer(timeline.final_text) if module is not None else {}
    name = module.name if module is not None else timeline.module
    provenance = evidence_provenance(timeline, spec.evidence, parsed if isinstance(parsed, dict) else {})
    progress = milestones(timeline, spec)
    findings = _evidence_findings(timeline, provenance) + detect(timeline, spec) + milestone_findings(progress)
    findings.sort(key=lambda finding: (min(finding.records, default=-1), finding.code))
    return AuditReport(name, provenance, findings, progress, final_view(timeline), final_mask(timeline))


def summarize_audits(audits: list) -> dict:
    """Run-level tally of episode audits (``result.json`` ``audit`` blocks): episodes audited, episodes with any
    finding, and per code the episodes with at least one finding of it."""
    audited = [audit for audit in audits if isinstance(audit, dict) and isinstance(audit.get("findings"), list)]
    per_code = {code: sum(any(isinstance(item, dict) and item.get("code") == code for item in audit["findings"])
                          for audit in audited) for code in CODES}
    return {"episodes": len(audited), "with_findings": sum(bool(audit["findings"]) for audit in audited),
            "by_code": per_code}


def format_report(report: AuditReport) -> str:
    """The report as text for a terminal: findings first, then each evidence field's provenance."""
    lines = [f"module: {report.module or 'unknown'}"]
    lines.append(f"findings: {len(report.findings)}" if report.findings else "findings: none")
    for finding in report.findings:
        records = ", ".join(str(seq) for seq in finding.records) or "-"
        lines.append(f"  [{finding.severity}] {finding.code} {finding.rule} (records {records}): {finding.message}")
    lines.append("evidence provenance:" if report.provenance else "evidence provenance: no evidence fields")
    for item in report.provenance:
        state = f"grounded ({item.basis}; records {', '.join(map(str, item.records))})" if item.grounded \
            else "UNGROUNDED"
        value = item.value["label"] if isinstance(item.value, dict) else item.value
        lines.append(f"  {item.field} = {value}: {state}" + (f" -- {item.note}" if item.note else ""))
    if report.milestones:
        steps = " -> ".join(f"{name}{'' if seq is None else f'@{seq}'}"
                            for name, seq in report.milestones["reached"].items())
        status = "complete" if report.milestones["complete"] else ("incomplete" if report.milestones["begun"]
                                                                    else "not begun")
        lines.append(f"milestones ({report.milestones['workflow']}): {steps} [{status}]")
    return "\n".join(lines)

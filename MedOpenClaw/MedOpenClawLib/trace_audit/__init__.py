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

The audit is one pass over the records in memory that does not grow with the trace: each rule is a checker fed the
calls as they stream by (:class:`Checkers`), keeping summaries of what was seen and done, judged at the end
against the answer (the trace's last model turn); :mod:`.bounded` states the caps, and the report's ``limits``
says what they left out (absent when nothing was).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from .detectors import Detectors
from .findings import CODES, SEVERITIES, FieldProvenance, Finding
from .milestones import LastMask, Workflow, final_mask, final_view, milestone_findings, stability
from .provenance import Produced, evidence_provenance
from .specs import GENERIC, AuditSpec
from .timeline import Call, Timeline

__all__ = ["CODES", "SEVERITIES", "AuditReport", "Checkers", "FieldProvenance", "Finding", "ModuleKnowledge",
           "audit_records", "format_report", "stability", "summarize_audits"]
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
    limits: dict = field(default_factory=dict)  # what the caps of .bounded left out, per summary

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
            **({"limits": self.limits} if self.limits else {}),
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


class Checkers:
    """Every rule's checker over one trace, fed each call as the trace streams by (a :class:`Timeline`'s
    ``on_call``), and the report they make at its end. The checkers are made when the first call arrives, under
    the module ``lookup`` gives for the header read by then (a trace writer puts it first)."""

    def __init__(self, module: ModuleKnowledge | None,
                 lookup: Callable[[str | None], ModuleKnowledge | None] | None = None):
        self.module, self.lookup = module, lookup
        self.spec: AuditSpec | None = None

    def bind(self, timeline: Timeline) -> AuditSpec:
        if self.spec is None:
            if self.lookup is not None:
                self.module = self.lookup(timeline.module)
            self.spec = self.module.audit if self.module is not None else GENERIC
            self.produced, self.detectors = Produced(), Detectors(self.spec)
            self.workflow, self.mask = Workflow(self.spec), LastMask()
        return self.spec

    def __call__(self, timeline: Timeline, call: Call) -> None:
        self.bind(timeline)
        self.produced.feed(call)
        self.detectors.feed(timeline, call)
        self.workflow.feed(timeline, call)
        self.mask.feed(timeline, call)

    def report(self, timeline: Timeline, parsed: dict | None = None) -> AuditReport:
        """The audit of the trace ``timeline`` has read, against ``parsed`` (the final answer parsed with the
        module's parser when None). The answer's evidence is judged under the module the whole trace names; a
        header that came after the first call is said in ``limits`` (its calls were judged under the rules bound
        before it)."""
        self.bind(timeline)
        module, late = self.module, {}
        named = self.lookup(timeline.module) if self.lookup is not None else module
        if getattr(named, "name", None) != getattr(module, "name", None):
            module = named
            late = {"module named after the first call": {"calls_judged_as": getattr(self.module, "name", None),
                                                          "named": timeline.module}}
        spec = module.audit if module is not None else GENERIC
        if parsed is None:
            parsed = module.read_answer(timeline.final_text) if module is not None else {}
        name = module.name if module is not None else timeline.module
        provenance = evidence_provenance(timeline, self.produced, spec.evidence,
                                         parsed if isinstance(parsed, dict) else {})
        progress = self.workflow.progress(timeline)
        findings = (_evidence_findings(timeline, provenance) + self.detectors.findings(timeline)
                    + milestone_findings(progress))
        findings.sort(key=lambda finding: (min(finding.records, default=-1), finding.code))
        limits = {**timeline.limits(), **self.produced.limits(), **self.detectors.limits(), **self.workflow.limits(),
                  **late}
        return AuditReport(name, provenance, findings, progress, final_view(timeline), final_mask(self.mask), limits)


def audit_records(records: Iterable, module: ModuleKnowledge | None = None, parsed: dict | None = None,
                  lookup: Callable[[str | None], ModuleKnowledge | None] | None = None) -> AuditReport:
    """Audit one episode's trace records (a list, or an iterator read once) under ``module``'s rules (the generic
    rules only without one), or under those of the module ``lookup`` gives for the trace header's module name;
    ``parsed`` is the parsed final answer (parsed from the trace's final text with the module's parser when
    omitted)."""
    checkers = Checkers(module, lookup)
    return checkers.report(Timeline(records, checkers), parsed)


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
    for what, detail in report.limits.items():
        lines.append(f"limits: {detail['left_out']} {what} not kept beyond the audit's cap of {detail['kept']}"
                     if "left_out" in detail else f"limits: {what}: {detail}")
    return "\n".join(lines)

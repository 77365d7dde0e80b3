"""The trace audit reads a trace of any length in bounded memory: what its checkers keep after N rounds of an
episode is what they keep after 2N, and whatever the caps of ``trace_audit.bounded`` leave out is said in the
report. Counted, not timed: the state is measured as the number of values the checkers and the timeline hold."""

from __future__ import annotations

import types
from collections import deque

import pytest
from test_trace_audit_rules import LUMIERE, REGISTRATION_TOOLS, SEGMENTATION_TOOLS, evidence_answer, image
from trace_builder import TraceBuilder, audit_trace

from MedOpenClawLib.bench.modules import known
from MedOpenClawLib.trace_audit import Checkers, bounded, findings, format_report, timeline
from MedOpenClawLib.trace_audit.timeline import Timeline

CAP = 4  # the caps on record lists and findings, made small so that a short trace passes them
DISTINCT = 8  # the cap on distinct things


@pytest.fixture
def small_caps(monkeypatch):
    for module, name, value in ((bounded, "SEQS_KEPT", CAP), (bounded, "DISTINCT_KEPT", DISTINCT),
                                (findings, "FINDINGS_KEPT", CAP), (timeline, "BASELINE_KEPT", CAP)):
        monkeypatch.setattr(module, name, value)


def episode(rounds: int) -> list[dict]:
    """``rounds`` rounds that each fire every radiology rule: an unregistered fusion (F3), a disjoint segmentation
    (F4), evidence cited on a volume no view shows (F3), a view, a conversion, a measurement, a failed workflow
    operation (G5); three distinct offsets, points and segmentations in all."""
    trace = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS + SEGMENTATION_TOOLS, volumes=LUMIERE)
    trace.prompt([image("axial", 0.0)])
    for number in range(rounds):
        trace.fusion("OLD_CT1", "CURRENT_CT1")
        trace.segment(f"s{number % 3}", [number % 3 * 10, 0, 0], [number % 3 * 10 + 1, 1, 1])
        trace.call("observe", {}, {}, [{**image("axial", float(number % 3)), "path": f"o{number}.png"}])
        trace.call("image_coords_to_ras", {"view": "axial"}, {"ras": [number % 3, 0, 0]})
        trace.call("measure_line", {}, {"length_mm": 12.0, "start_ras": [0, 0, 0], "end_ras": [0, 12, 0]})
        trace.call("record_key_slices", {"volume_name": "OLD_FLAIR"}, {"volume_name": "OLD_FLAIR"})
        trace.call("apply_transform", {"volume_name": "OLD_FLAIR", "transform_name": "none"}, ok=False)
    return trace.answer("diameter 12 mm\n" + evidence_answer(axial=2.0, ras=(1.0, 0.0, 0.0))).records


def held(value, path: frozenset[int] = frozenset()) -> int:
    """How many values ``value`` holds, through containers and the attributes of this package's objects, each
    reference counted (shared or not; ``path`` only stops a cycle); the module's spec, shared by every audit, is
    not counted."""
    if id(value) in path or value is None or isinstance(value, (str, bytes, int, float, type, types.FunctionType,
                                                                types.MethodType, types.BuiltinFunctionType)):
        return 1
    path = path | {id(value)}
    if isinstance(value, dict):
        return 1 + sum(held(key, path) + held(item, path) for key, item in value.items())
    if isinstance(value, (list, tuple, set, frozenset, deque)):
        return 1 + sum(held(item, path) for item in value)
    names = list(getattr(value, "__dict__", {})) + [name for cls in type(value).__mro__
                                                  for name in getattr(cls, "__slots__", ())]
    return 1 + sum(held(getattr(value, name, None), path) for name in names
                   if name not in ("module", "lookup", "spec"))


def state_sizes(records: list[dict], marks: set[int]) -> list[int]:
    """The values held by the timeline and the checkers right after each record numbered in ``marks``."""
    checkers, sizes = Checkers(known("lumiere")), []

    def feed(read: Timeline, call) -> None:
        checkers(read, call)
        if call.seq in marks:
            sizes.append(held((read, checkers)))

    checkers.report(Timeline(iter(records), feed))
    return sizes


def test_the_audit_state_stops_growing_once_the_caps_are_reached(small_caps):
    records = episode(48)
    last_calls = [record["seq"] for record in records if record.get("action") == "record_key_slices"]
    sizes = state_sizes(records, {last_calls[23], last_calls[35], last_calls[47]})
    assert sizes[0] == sizes[1] == sizes[2]  # 24, 36, 48 rounds (every cap reached by 24): the same state


def test_what_the_caps_leave_out_is_reported(small_caps):
    records = episode(12)
    report = audit_trace(records, "lumiere")
    rules = [finding.rule for finding in report.findings]
    assert rules.count("F3.fusion_unregistered") == CAP + 1  # CAP listed, then one finding counting the rest
    closing = next(finding for finding in report.findings
                   if finding.rule == "F3.fusion_unregistered" and not finding.records)
    assert closing.message.startswith(f"{12 - CAP} more F3.fusion_unregistered findings are not listed")
    assert rules.count("F3.evidence_volume") == CAP + 1 and rules.count("F4.discarded_unchecked") == CAP + 1
    measured = next(item for item in report.provenance if item.field == "measurement[0]")
    assert measured.grounded and len(measured.records) == CAP and "more records than the 4 listed" in measured.note
    operations = [record["seq"] for record in records if record.get("action") == "apply_transform"]
    assert report.milestones["operations"] == operations[:CAP] and report.milestones["operations_total"] == 12
    incomplete = next(finding for finding in report.findings if finding.code == "G5")
    assert incomplete.records == tuple(operations[:CAP]) and incomplete.message.endswith("than the 4 listed)")
    assert report.limits == {} and "limits" not in report.to_json()  # three distinct of each: all kept


def test_distinct_things_beyond_the_cap_are_counted_and_named_in_the_note(small_caps):
    trace = TraceBuilder(tools=("observe",)).prompt()
    for offset in range(DISTINCT + 3):
        trace.call("observe", {}, {}, [image("axial", float(offset * 10))])
    report = audit_trace(trace.answer(evidence_answer(axial=float(DISTINCT * 10))).records, "ucsf-pdgm")
    axial = next(item for item in report.provenance if item.field == "key_slice_axial_mm")
    assert not axial.grounded and "3 shown images beyond the audit's cap were not kept" in axial.note
    assert report.limits == {"shown images": {"kept": DISTINCT, "left_out": 3}}
    assert report.to_json()["limits"] == report.limits
    assert f"limits: 3 shown images not kept beyond the audit's cap of {DISTINCT}" in format_report(report)

"""Bounded resources under long valid sessions (issue 23): the trace grows linearly (state deltas, not a full
snapshot per record) and still rebuilds every state exactly (replay, crash restore, the helpers the trace
auditors use); evidence items per session have a ceiling; served sessions have a default round budget."""

from __future__ import annotations

import argparse
import json

import pytest
from runtime_data import call_error, call_ok

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.core import policy
from MedOpenClawLib.core.audit import (
    AuditTrace,
    StateDeltaError,
    action_states,
    apply_state_delta,
    canonical_json,
    joined_length,
    read_trace,
    section_texts,
    state_at,
    state_delta,
    verify_trace,
)
from MedOpenClawLib.replay import replay_trace
from MedOpenClawLib.server.sessions import DEFAULT_ROUNDS, add_session_arguments


def _bookmark_session(tmp_path, root, calls: int):
    trace = AuditTrace(tmp_path / "trace.jsonl")
    registry = build_slicer_registry([root], trace=trace)
    call_ok(registry, "open_case", dicom_dir=str(root), size=64)
    states = [registry.state()]
    sizes = []
    for index in range(calls):
        before = (tmp_path / "trace.jsonl").stat().st_size
        call_ok(registry, "bookmark_view", view=("axial", "coronal")[index % 2], label=f"b{index}")
        sizes.append((tmp_path / "trace.jsonl").stat().st_size - before)
        states.append(registry.state())
    return registry, states, sizes


def test_trace_bytes_per_call_stay_flat_and_every_state_is_rebuilt_exactly(tmp_path, data_root):
    registry, states, sizes = _bookmark_session(tmp_path, data_root, 240)
    records = read_trace(tmp_path / "trace.jsonl")
    rebuilt = [state for _, state in action_states(records)]
    assert rebuilt == states
    assert state_at(records, records[-1]["seq"]) == registry.state()
    # the evidence list holds 240 ids at the end: a full snapshot per record would grow each record by it
    early, late = sum(sizes[10:40]) / 30, sum(sizes[-30:]) / 30
    assert late < 1.5 * early, (early, late)
    snapshots = sum("state" in record for record, _ in action_states(records))
    assert 1 < snapshots < 40  # periodic snapshots: bounded by the delta bytes, not one per record
    assert verify_trace(tmp_path / "trace.jsonl").ok
    assert replay_trace(tmp_path / "trace.jsonl", [data_root]).ok


def test_state_delta_round_trips_and_malformed_deltas_are_reported():
    cases = [({}, {"a": 1}), ({"a": [1, 2]}, {"a": [1, 2, 3]}), ({"a": [1, 2]}, {"a": [2]}),
             ({"a": {"b": None, "c": 1}}, {"a": {"b": None}}), ({"x": 1}, {"x": 1.0}), ({"x": 1}, {"x": True}),
             ({"v": {"o": 1.5}}, {"v": {"o": 2.5}, "w": None})]
    for old, new in cases:
        rebuilt = apply_state_delta(old, state_delta(old, new))
        assert rebuilt == new and json.dumps(rebuilt) == json.dumps(new)
    for bad in ([], {"$append": 3}, {"$keys": []}, {"$drop": "a"}):
        with pytest.raises(StateDeltaError):
            apply_state_delta({"a": 1}, bad)


def test_a_states_length_from_its_sections_is_the_length_of_its_text():
    """The snapshot-or-delta choice reads a state's size from its sections' texts: it must be the text's own."""
    states = [{}, {"a": 1}, {"a": [1, 2.5, None], "b": {"z": "x", "y": True}}, {"é": "ü∑", "\n\"": ["\u0000"]},
              {"views": {"axial": {"offset_mm": -12.5}}, "evidence": [{"ras": [1, 2, 3]}] * 40, "layout": "four_up"}]
    for state in states:
        assert joined_length(section_texts(state)) == len(canonical_json(state)), state
    assert section_texts(["not", "an", "object"]) is None and section_texts({1: "x"}) is None


def test_replay_reports_a_trace_whose_deltas_do_not_apply(tmp_path, data_root):
    _bookmark_session(tmp_path, data_root, 3)
    lines = (tmp_path / "trace.jsonl").read_text().splitlines()
    record = json.loads(lines[-1])
    record["state_delta"] = {"$append": "not a list"}
    lines[-1] = json.dumps(record)
    (tmp_path / "trace.jsonl").write_text("\n".join(lines) + "\n")
    report = replay_trace(tmp_path / "trace.jsonl", [data_root])
    assert not report.ok and "deltas do not apply" in report.message


def test_evidence_items_per_session_have_a_ceiling(data_root, monkeypatch):
    monkeypatch.setattr(policy, "MAX_EVIDENCE_ITEMS", 3)
    registry = build_slicer_registry([data_root])
    call_ok(registry, "open_case", dicom_dir=str(data_root), size=64)
    for index in range(3):
        call_ok(registry, "bookmark_view", view="axial", label=f"b{index}")
    error = call_error(registry, "bookmark_view", "evidence_full", view="axial", label="one more")
    assert "give the final answer" in error.error["message"]


def test_served_sessions_have_a_default_round_budget(tmp_path):
    parser = argparse.ArgumentParser()
    add_session_arguments(parser)
    assert parser.parse_args(["--data-root", str(tmp_path)]).max_rounds == DEFAULT_ROUNDS
    assert parser.parse_args(["--data-root", str(tmp_path), "--max-rounds", "0"]).max_rounds is None
    assert parser.parse_args(["--data-root", str(tmp_path), "--max-rounds", "7"]).max_rounds == 7
    with pytest.raises(SystemExit):
        parser.parse_args(["--data-root", str(tmp_path), "--max-rounds", "-1"])

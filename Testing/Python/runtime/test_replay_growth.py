"""Replay's work per action does not grow with the action's position in the trace.

Crash recovery replays the whole session, so a replayed action that costs more the later it stands (a check
walking every markups node of the scene, or comparing the whole evidence list element by element) makes recovery
superlinear in the session's length (bench/recovery.json). Counted, not timed: the Python and C function calls
that ``sys.setprofile`` sees while each action is replayed and checked.
"""

from __future__ import annotations

import copy
import sys

import pytest
from runtime_data import lesion_center_ras, oblique_lps_affine, phantom, write_nifti

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.replay import replay_records

MARKS = 40  # evidence points (and markups nodes) the scene holds by the end of the session


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(data root, records) of one session, recorded once: each test replays a copy of its records."""
    root = tmp_path_factory.mktemp("growth") / "data"
    root.mkdir()
    write_nifti(root / "CT.nii.gz", phantom(0), oblique_lps_affine())
    return root, recorded_session(root)


def recorded_session(root) -> list[dict]:
    """open_case, then points of evidence alternating with scrolls; one call that fails, as agents' calls do."""
    registry = build_slicer_registry([root])
    center = [float(value) for value in lesion_center_ras(oblique_lps_affine())]
    assert registry.call("open_case", {"dicom_dir": str(root), "size": 64}).ok
    for index in range(MARKS):
        assert registry.call("record_point", {"ras": center, "label": f"p{index}"}).ok
        offset = center[2] + (index % 5) - 2.0
        assert registry.call("set_slice_offset", {"view": "axial", "offset": offset, "size": 64}).ok
        if index == MARKS // 2:
            assert not registry.call("record_point", {"ras": [1e6, 0.0, 0.0], "label": "outside"}).ok
    return list(registry.trace.records)


def work_per_action(registry, records: list[dict]) -> tuple[object, list[tuple[str, int]]]:
    """The replay's report and, per replayed action, its name and the function calls from its start to the
    next one's (so the check of its outcome is counted with it)."""
    calls = 0
    starts: list[tuple[str, int]] = []

    def count(frame, event, argument) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    call = registry.call

    def marked(name, *args, **kwargs):
        starts.append((name, calls))
        return call(name, *args, **kwargs)

    registry.call = marked
    sys.setprofile(count)
    try:
        report = replay_records(registry, records)
    finally:
        sys.setprofile(None)
    ends = [start for _, start in starts[1:]] + [calls]
    return report, [(name, end - start) for (name, start), end in zip(starts, ends)]


def test_a_replayed_action_costs_the_same_late_in_the_trace_as_early(recorded):
    data_root, records = recorded[0], copy.deepcopy(recorded[1])
    report, work = work_per_action(build_slicer_registry([data_root]), records)
    assert report.ok, report.message
    actions = [record for record in records if record.get("kind") == "action"]
    assert [name for name, _ in work] == [record["action"] for record in actions]
    for name in ("record_point", "set_slice_offset"):
        costs = [calls for record, (_, calls) in zip(actions, work)
                 if record["action"] == name and record["status"] == "ok"][1:]  # the first builds caches
        early, late = costs[:5], costs[-5:]
        # the scene holds ~8x the markups by the end: a check that visits each would show here many times over
        assert max(late) <= max(early) + 20, (name, early, late)


def test_a_replay_still_refuses_a_trace_it_diverges_from(recorded):
    data_root, records = recorded[0], copy.deepcopy(recorded[1])
    tampered = next(record for record in reversed(records) if record.get("action") == "set_slice_offset")
    tampered["arguments"] = {**tampered["arguments"], "offset": tampered["arguments"]["offset"] + 1.0}
    report = replay_records(build_slicer_registry([data_root]), records)
    assert not report.ok and report.first_mismatch_seq == tampered["seq"]
    assert report.message.startswith("set_slice_offset: views.axial."), report.message

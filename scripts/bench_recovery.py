"""Crash recovery of the supervised viewer behind ``serve``/``mcp``, and what supervision costs per call.

For sessions of 10, 100 and 1000 calls on the MNI152 1 mm template (nilearn's copy; real data), a real native
crash (SIGSEGV in the markups sink of the test double ``Testing/Python/crashing_worker.py``) is triggered and
timed from the crashing call to the answer ``viewer_crashed`` with the session restored: a child takes over (the
spare viewer, or with ``spare=False`` a newly started one), every action is replayed and its snapshot checked,
and the restored state is compared with the state before the crash. Each recovery also reports the CPU time
of the parent (the crashing call, ``time.process_time``) and of the child that restored (``/proc/PID/stat``:
the spare's replay alone; a newly started child's start-up included), the bytes of the restore message, and, for
the first trial of each size, the CPU per replayed action by quarter of the trace (the same trace replayed
in-process): flat quarters mean each action costs the same wherever it stands. Then the latency of the same
calls in-process and supervised (p50/p95 ms, images delivered as PNG the way the front-ends send them). Writes
bench/recovery.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY / "Testing" / "Python"))  # the crashing worker double

import crashing_worker  # noqa: E402
import nilearn.datasets  # noqa: E402

from MedOpenClawLib.apps.radiology import build_slicer_registry  # noqa: E402
from MedOpenClawLib.core.audit import AuditTrace, read_trace, verify_trace  # noqa: E402
from MedOpenClawLib.replay import replay_records  # noqa: E402
from MedOpenClawLib.server.supervisor import VIEWER_CRASHED, SupervisedRegistry  # noqa: E402

MNI_T1 = Path(nilearn.datasets.__file__).parent / "data" / "mni_icbm152_t1_tal_nlin_sym_09a_converted.nii.gz"
SIZE = 256


def percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered), 3),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3), "n": len(ordered)}


def session_calls(ranges: dict[str, tuple[float, float]]):
    """An endless, deterministic mix of what an agent does: scroll by offset, zoom, observe, mark, window."""
    views = ("axial", "sagittal", "coronal")
    for index in itertools.count():
        view = views[index % 3]
        low, high = ranges[view]
        kind = index % 6
        offset = low + (high - low) * ((index * 37) % 100) / 100.0
        if kind in (0, 1):
            yield "set_slice_offset", {"view": view, "offset": round(offset, 2), "size": SIZE}
        elif kind == 2:
            yield "zoom", {"view": view, "factor": 1.25 if index % 12 < 6 else 0.8, "size": SIZE}
        elif kind == 3:
            yield "observe", {"view": view, "size": SIZE}
        elif kind == 4:
            yield "record_point", {"ras": [0.0, -18.0, 10.0], "label": f"p{index}"}
        else:
            yield "wl", {"window": 60.0 + index % 40, "level": 40.0, "size": SIZE}


def offset_ranges(registry) -> dict[str, tuple[float, float]]:
    ranges = {}
    for view in ("axial", "sagittal", "coronal"):
        data = registry.call("get_slice_offset_range", {"view": view}).data
        ranges[view] = (data["min_mm"], data["max_mm"])
    return ranges


def open_session(registry, root: Path, calls: int) -> None:
    """``calls`` audited actions: open_case, then the mix."""
    assert registry.call("open_case", {"dicom_dir": str(root), "size": SIZE}).ok
    mix = session_calls(offset_ranges(registry))
    for _ in range(calls - 3 - 1):  # open_case and three range queries are calls too
        name, arguments = next(mix)
        result = registry.call(name, arguments)
        assert result.ok, (name, result.error)


def process_cpu_ms(pid: int) -> float:
    """User + system CPU of process ``pid`` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def replay_cpu_by_quarter(root: Path, trace_path: Path) -> dict:
    """The trace's actions replayed in-process on a fresh viewer: CPU ms per action in each quarter of the trace
    (each action timed from its call to the next one's, its snapshot check included)."""
    registry = build_slicer_registry([root])
    starts: list[float] = []
    call = registry.call

    def timed(*args, **kwargs):
        starts.append(time.process_time())
        return call(*args, **kwargs)

    registry.call = timed
    report = replay_records(registry, read_trace(trace_path))
    ends = starts[1:] + [time.process_time()]
    costs = [(end - start) * 1000.0 for start, end in zip(starts, ends)]
    quarter = max(1, len(costs) // 4)
    return {"ok": report.ok, "actions": len(costs), "cpu_ms_total": round(sum(costs), 1),
            "cpu_ms_per_action_by_quarter": [round(statistics.mean(costs[index:index + quarter]), 3)
                                             for index in range(0, quarter * 4, quarter)]}


def recovery(root: Path, calls: int, workdir: Path, spare: bool, trial: int) -> dict:
    """One session of ``calls`` calls crashed and restored; the first trial with a spare also profiles the replay."""
    trace_path = workdir / f"trace-{calls}-{spare}-{trial}.jsonl"  # traces are never overwritten
    started = time.perf_counter()
    registry = SupervisedRegistry("radiology", [root], trace=AuditTrace(trace_path),
                                  workdir=workdir / f"v{calls}-{spare}-{trial}", command=crashing_worker.command,
                                  spare=spare)
    start_ms = (time.perf_counter() - started) * 1000.0
    try:
        open_session(registry, root, calls)
        child_cpu_before = 0.0  # a child started after the crash: all its CPU is the recovery's
        if registry._spare is not None:
            registry._spare.wait()  # steady state: the spare has booted (a crash sooner waits for the rest of it)
            child_cpu_before = process_cpu_ms(registry._spare._child.process.pid)
        message_bytes = len(json.dumps({"op": "restore", "records": registry._history()}, default=str).encode())
        before = registry.state()
        started, parent_cpu = time.perf_counter(), time.process_time()
        crashed = registry.call("record_point", {"ras": [0.0, 0.0, 0.0], "label": "CRASH:segv"})
        crash_to_ready_ms = (time.perf_counter() - started) * 1000.0
        parent_cpu_ms = (time.process_time() - parent_cpu) * 1000.0
        child_cpu_ms = process_cpu_ms(registry._worker.process.pid) - child_cpu_before
        assert crashed.error["code"] == VIEWER_CRASHED, crashed.error
        record = next(r for r in reversed(read_trace(trace_path)) if r["kind"] == VIEWER_CRASHED)["payload"]
        restored = registry.state() == before
        next_call_ok = registry.call("observe", {"view": "axial", "size": SIZE}).ok
    finally:
        registry.close()
    entry = {"calls_in_trace": calls, "spare_viewer": spare, "spare_used": record["spare_used"],
             "replayed_actions": record["replayed_actions"], "restored": record["restored"],
             "state_equal_after_restore": restored, "next_call_ok": next_call_ok,
             "crash_to_ready_ms": round(crash_to_ready_ms, 1), "supervisor_recovery_ms": record["recovery_ms"],
             "parent_cpu_ms": round(parent_cpu_ms, 1), "child_cpu_ms": round(child_cpu_ms, 1),
             "restore_message_bytes": message_bytes, "child_start_ms": round(start_ms, 1), "exit": record["exit"],
             "trace_verifies": verify_trace(trace_path).ok}
    if spare and trial == 0:
        entry["replay_in_process"] = replay_cpu_by_quarter(root, trace_path)
    return entry


def per_call_overhead(root: Path, repeats: int, workdir: Path) -> dict:
    """The same calls in-process and supervised, each timed up to the JSON a front-end sends (PNG included)."""
    cases = {"get_viewer_state": ("get_viewer_state", lambda i: {}),
             "set_slice_offset_256": ("set_slice_offset", lambda i: {"view": "axial", "offset": -30.0 + i % 40,
                                                                    "size": SIZE}),
             "observe_3x512_png": ("observe", lambda i: {"size": 512})}
    in_process = build_slicer_registry([root])
    supervised = SupervisedRegistry("radiology", [root], workdir=workdir / "overhead")
    report = {}
    try:
        for registry in (in_process, supervised):
            assert registry.call("open_case", {"dicom_dir": str(root), "size": SIZE}).ok
        for label, (name, arguments) in cases.items():
            samples = {"in_process": [], "supervised": []}
            for index in range(repeats):
                for key, registry in (("in_process", in_process), ("supervised", supervised)):
                    started = time.perf_counter()
                    json.dumps(registry.call(name, arguments(index)).to_json())
                    samples[key].append((time.perf_counter() - started) * 1000.0)
            entry = {key: percentiles(values) for key, values in samples.items()}
            entry["overhead_p50_ms"] = round(entry["supervised"]["p50_ms"] - entry["in_process"]["p50_ms"], 3)
            entry["overhead_p95_ms"] = round(entry["supervised"]["p95_ms"] - entry["in_process"]["p95_ms"], 3)
            report[label] = entry
    finally:
        supervised.close()
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 3000])
    parser.add_argument("--trials", type=int, default=3, help="crashes per session size and spare setting")
    parser.add_argument("--repeats", type=int, default=60, help="calls per action kind for the overhead")
    parser.add_argument("--out", type=Path, default=REPOSITORY / "bench" / "recovery.json")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-recovery-"))
    try:
        root = workdir / "data"
        root.mkdir()
        shutil.copy(MNI_T1, root / "MNI152_T1_1mm.nii.gz")
        recoveries = [recovery(root, calls, workdir, spare, trial)
                      for spare in (True, False) for calls in args.sizes for trial in range(args.trials)]
        overhead = per_call_overhead(root, args.repeats, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = {
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_average_at_end": [round(value, 2) for value in os.getloadavg()]},
        "volume": "MNI152 T1 1 mm template (197x233x189), nilearn",
        "median_crash_to_ready_ms": {
            "spare_viewer" if spare else "no_spare_viewer": {
                str(calls): round(statistics.median(entry["crash_to_ready_ms"] for entry in recoveries
                                                    if entry["calls_in_trace"] == calls
                                                    and entry["spare_viewer"] == spare), 1)
                for calls in args.sizes}
            for spare in (True, False)},
        "median_cpu_ms": {
            f"{'spare' if spare else 'no_spare'}_{side}": {
                str(calls): round(statistics.median(entry[f"{side}_cpu_ms"] for entry in recoveries
                                                    if entry["calls_in_trace"] == calls
                                                    and entry["spare_viewer"] == spare), 1)
                for calls in args.sizes}
            for spare in (True, False) for side in ("child", "parent")},
        "restore_message_bytes": {str(entry["calls_in_trace"]): entry["restore_message_bytes"]
                                  for entry in recoveries if entry["spare_viewer"]},
        "replay_in_process": {str(entry["calls_in_trace"]): entry["replay_in_process"]
                              for entry in recoveries if "replay_in_process" in entry},
        "all_restored_and_verified": all(entry["restored"] and entry["state_equal_after_restore"]
                                         and entry["next_call_ok"] and entry["trace_verifies"]
                                         for entry in recoveries),
        "recovery": recoveries,
        "per_call": overhead,
        "notes": "crash_to_ready_ms: the crashing call's latency, i.e. crash detection + a child (the spare booted in "
                 "the background, or a new one with --no-spare-viewer) + replay of every action with its snapshot "
                 "checked; child_cpu_ms: CPU of the child that restored (the spare's replay alone; without a "
                 "spare, its start-up included); parent_cpu_ms: the supervisor's CPU over the crashing call; "
                 "replay_in_process: the trace replayed on a fresh in-process viewer, CPU ms per action by quarter of "
                 "the trace; "
                 "child_start_ms: starting a supervised viewer (process + slicer-core application). "
                 "per_call: registry.call + Result JSON (PNG base64) in-process vs through the child. The machine is "
                 "shared: see load_average_at_end.",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Adversarial fuzzing of every action (Track A, Track B, pathology) through the registry; writes bench/fuzz.json.

Each batch of calls runs in a child process, so a native crash (SIGSEGV/SIGABRT in VTK, ITK, OpenSlide) is
counted as a crash instead of ending the run. Per call the child checks: registry.call never raises, every call
is audited, no internal_error, a refused call leaves the state unchanged, state and result are strict JSON
(finite numbers), and nothing outside the data roots was read into the scene. Per batch: its trace verifies
(anchored) and replays. The data root holds hostile files (``action_fuzz.write_hostile_files``): none may load,
and no unsafe name may reach the scene. Hostile model replies go through every answer parser and the
tool-argument decoder. A memory child measures growth over repeated passes of the same calls; a long-session
child makes thousands of valid calls (bookmarks, points, scrolls, zooms) and records peak RSS and trace bytes per
call early and late (linear growth: the late figure stays near the early one) and that the trace still rebuilds
the final state exactly. Everything must be zero/pass (the JSON's ``pass``). Run it niced:
``nice -n 10 python scripts/fuzz_actions.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "MedOpenClaw"), str(REPO / "Testing" / "Python")]
KINDS = ("A", "B", "pathology")
SHARE = {"A": 0.4, "B": 0.4, "pathology": 0.2}
ACCUMULATING = ("open_case", "load_case", "load_image", "record", "draw_roi", "measure_line", "bookmark", "export",
                "segment", "register", "resample", "apply_transform", "import", "capture", "vista3d")


def rss_mib() -> float:
    """Current resident set size (from /proc, as getrusage only gives the peak)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_batch(kind: str, seed: int, calls: int, workdir: Path) -> dict:
    """Run ``calls`` fuzzed calls on a fresh session; verify and replay its trace."""
    import action_fuzz as fuzz

    from MedOpenClawLib.core.audit import verify_trace
    from MedOpenClawLib.core.hygiene import preview
    from MedOpenClawLib.replay import replay_trace

    layout = fuzz.write_layout(workdir / "data")
    trace_path = workdir / f"trace-{kind}-{seed}.jsonl"
    session = fuzz.build_session(kind, layout, trace_path)
    tally = fuzz.Tally()
    rng = random.Random(seed)
    last_call = workdir / f"last-call-{kind}-{seed}.json"
    for name, arguments in fuzz.priming_calls(session):
        fuzz.checked_call(session, name, arguments, tally)
    started = time.perf_counter()
    for _ in range(calls):
        name, arguments = fuzz.draw_call(session, rng)
        shown = arguments if fuzz.strict_json(arguments) else preview(arguments)
        last_call.write_text(json.dumps({"action": name, "arguments": shown}))
        fuzz.checked_call(session, name, arguments, tally)
    elapsed = time.perf_counter() - started
    verify = verify_trace(trace_path, check_artifacts=True)
    replay = replay_trace(trace_path, [layout.root])  # the roots the session had, never those the trace records
    return {"kind": kind, "seed": seed, "tally": tally.to_json(), "seconds": round(elapsed, 2),
            "trace_verify": {"ok": verify.ok, "anchored": verify.anchored, "message": verify.message},
            "replay": {"ok": replay.ok, "actions": replay.actions, "message": replay.message[:300]}}


def child_memory(seed: int, calls: int, passes: int, workdir: Path) -> dict:
    """RSS over repeated passes of one fixed list of non-accumulating calls (refusals, views, zooms)."""
    import action_fuzz as fuzz

    layout = fuzz.write_layout(workdir / "data", pathology=False)
    session = fuzz.build_session("B", layout, workdir / "trace-memory.jsonl")
    tally = fuzz.Tally()
    for name, arguments in fuzz.priming_calls(session):
        fuzz.checked_call(session, name, arguments, tally)
    rng = random.Random(seed)
    fixed = []
    while len(fixed) < calls:
        name, arguments = fuzz.draw_call(session, rng, adversarial=0.6)
        if not any(word in name for word in ACCUMULATING):
            fixed.append((name, arguments))
    samples = []
    for _ in range(passes):
        for name, arguments in fixed:
            fuzz.checked_call(session, name, arguments, tally)
        samples.append(round(rss_mib(), 2))
    growth = samples[-1] - samples[1] if passes > 2 else 0.0  # the first pass warms caches and pools
    per_thousand = growth / ((passes - 2) * calls / 1000) if passes > 2 else 0.0
    return {"calls_per_pass": calls, "passes": passes, "rss_mib_after_each_pass": samples,
            "growth_mib_after_warmup": round(growth, 2), "growth_mib_per_1000_calls": round(per_thousand, 3),
            "tally": tally.to_json()}


LONG_CALLS = (("bookmark_view", {"view": "axial", "label": "b"}), ("record_point", {"ras": [0.0, 0.0, 0.0]}),
              ("scroll", {"view": "axial", "direction": "up", "size": 64}), ("zoom", {"view": "coronal", "factor": 1.1,
                                                                                 "size": 64}),
              ("scroll", {"view": "axial", "direction": "down", "size": 64}), ("bookmark_view", {"view": "coronal"}))


def child_long_session(calls: int, workdir: Path) -> dict:
    """Peak RSS and trace bytes per call over ``calls`` valid calls on one session (the evidence ceiling refuses
    items past it; those refusals are valid calls too), and an exact rebuild of the final state from the trace."""
    import action_fuzz as fuzz

    from MedOpenClawLib.core.audit import read_trace, state_at

    layout = fuzz.write_layout(workdir / "data", pathology=False)
    trace_path = workdir / "trace-long.jsonl"
    session = fuzz.build_session("A", layout, trace_path)
    registry = session.registry
    assert registry.call("open_case", {"dicom_dir": str(layout.root / "ct"), "size": 64}).ok
    window = max(calls // 10, 1)
    sizes, codes, started = [], {}, time.perf_counter()
    for index in range(calls):
        name, arguments = LONG_CALLS[index % len(LONG_CALLS)]
        before = trace_path.stat().st_size
        result = registry.call(name, {**arguments, **({"label": f"{name}{index}"} if "label" in arguments else {})})
        sizes.append(trace_path.stat().st_size - before)
        if not result.ok:
            codes[result.error["code"]] = codes.get(result.error["code"], 0) + 1
    elapsed = time.perf_counter() - started
    early, late = sum(sizes[:window]) / window, sum(sizes[-window:]) / window
    records = read_trace(trace_path)
    rebuilt = state_at(records, records[-1]["seq"]) == registry.state()
    return {"calls": calls, "seconds": round(elapsed, 1), "trace_bytes": trace_path.stat().st_size,
            "trace_bytes_per_call_first_tenth": round(early, 1), "trace_bytes_per_call_last_tenth": round(late, 1),
            "late_over_early": round(late / early, 3), "peak_rss_mib": round(peak_rss_mib(), 1),
            "evidence_items": len(registry.context.evidence.items), "refusals": codes,
            "final_state_rebuilt_exactly": rebuilt}


def peak_rss_mib() -> float:
    """Peak resident set size of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def model_replies() -> dict:
    """Every hostile model reply through every answer parser and the tool-argument decoder."""
    import action_fuzz as fuzz

    tally = fuzz.Tally()
    for text in fuzz.HOSTILE_REPLIES:
        fuzz.check_model_reply(text, tally)
    return tally.to_json()


def run_child(arguments: list[str], timeout: float) -> tuple[dict | None, str]:
    """The child's report, or why there is none: ``signal N`` (a native crash), ``exit N``, ``timeout``."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", *arguments]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    except subprocess.TimeoutExpired:
        return None, "timeout"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode < 0:
        return None, f"signal {-done.returncode}: {done.stderr[-1500:]}"
    if done.returncode != 0 or not lines:
        return None, f"exit {done.returncode}: {done.stderr[-1500:]}"
    return json.loads(lines[-1]), ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000, help="fuzzed calls in total (all kinds)")
    parser.add_argument("--batch", type=int, default=1000, help="calls per child process (one fresh session)")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--memory-calls", type=int, default=400)
    parser.add_argument("--memory-passes", type=int, default=6)
    parser.add_argument("--long-calls", type=int, default=3000, help="valid calls of the long-session child")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "fuzz.json")
    parser.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        mode, *rest = args.child
        workdir = Path(rest[-1])
        if mode == "batch":
            report = child_batch(rest[0], int(rest[1]), int(rest[2]), workdir)
        elif mode == "long":
            report = child_long_session(int(rest[0]), workdir)
        else:
            report = child_memory(int(rest[0]), int(rest[1]), int(rest[2]), workdir)
        print(json.dumps(report, default=str), flush=True)
        return 0

    import action_fuzz as fuzz

    from MedOpenClawLib.core.sinks import write_json

    started = time.perf_counter()
    totals = fuzz.Tally()
    crashes, batches, per_kind = [], [], {kind: 0 for kind in KINDS}
    with tempfile.TemporaryDirectory(prefix="medopenclaw-fuzz-") as scratch:
        plan = []
        for kind in KINDS:
            remaining = int(round(args.calls * SHARE[kind]))
            while remaining > 0:
                plan.append((kind, min(args.batch, remaining)))
                remaining -= args.batch
        for index, (kind, calls) in enumerate(plan):
            seed = args.seed + index
            workdir = Path(scratch) / f"batch-{index}"
            workdir.mkdir()
            report, failure = run_child(["batch", kind, str(seed), str(calls), str(workdir)], timeout=calls + 600)
            if report is None:
                last = workdir / f"last-call-{kind}-{seed}.json"
                crashes.append({"kind": kind, "seed": seed, "failure": failure[-800:],
                                "last_call": last.read_text()[:1000] if last.exists() else None})
                print(f"[{index + 1}/{len(plan)}] {kind} seed {seed}: CRASH {failure[:200]}", flush=True)
                continue
            totals.merge(report["tally"])
            per_kind[kind] += report["tally"]["calls"]
            batches.append({key: report[key] for key in ("kind", "seed", "seconds", "trace_verify", "replay")})
            print(f"[{index + 1}/{len(plan)}] {kind} seed {seed}: {report['tally']['calls']} calls in "
                  f"{report['seconds']} s, verify {report['trace_verify']['ok']}, replay {report['replay']['ok']}",
                  flush=True)
        memory_dir = Path(scratch) / "memory"
        memory_dir.mkdir()
        memory, failure = run_child(["memory", str(args.seed), str(args.memory_calls), str(args.memory_passes),
                                     str(memory_dir)], timeout=1800)
        long_dir = Path(scratch) / "long"
        long_dir.mkdir()
        long_session, failure_long = run_child(["long", str(args.long_calls), str(long_dir)],
                                               timeout=args.long_calls + 900)
    if long_session is None:
        crashes.append({"kind": "long_session", "failure": failure_long[-800:]})
        long_session = {}
    replies = model_replies()
    if memory is None:
        crashes.append({"kind": "memory", "failure": failure[-800:]})
        memory = {}
    else:
        totals.merge(memory.pop("tally"))
    counts = totals.to_json()
    verify_ok = all(batch["trace_verify"]["ok"] and batch["trace_verify"]["anchored"] for batch in batches)
    replay_ok = all(batch["replay"]["ok"] for batch in batches)
    memory_ok = bool(memory) and memory["growth_mib_per_1000_calls"] < 1.0
    zero_keys = ("internal_errors", "escapes", "refused_changed_state", "non_finite_state", "non_json_results",
                 "root_escapes", "unaudited", "hostile_files_loaded", "unsafe_scene_names")
    long_ok = bool(long_session) and long_session["late_over_early"] < 1.5 and long_session[
        "final_state_rebuilt_exactly"]
    replies_ok = replies["escapes"] == 0 and replies["non_json_results"] == 0
    result = {
        "generated_by": "scripts/fuzz_actions.py",
        "seed": args.seed,
        "calls": counts["calls"],
        "calls_per_kind": per_kind,
        "crashes": sum(crash["failure"].startswith("signal") for crash in crashes),
        "child_failures": len(crashes),  # crashes, timeouts and harness errors together
        **{key: counts[key] for key in ("ok", "refused", *zero_keys)},
        "trace_verify": {"sessions": len(batches), "ok": verify_ok},
        "replay": {"sessions": len(batches), "ok": replay_ok},
        "memory": {**memory, "ok": memory_ok, "limit_mib_per_1000_calls": 1.0},
        "long_session": {**long_session, "ok": long_ok, "limit_late_over_early": 1.5},
        "model_replies": {"replies": len(fuzz.HOSTILE_REPLIES),
                          "parser_calls": replies["calls"], "escapes": replies["escapes"],
                          "non_json_results": replies["non_json_results"], "examples": replies["examples"],
                          "ok": replies_ok},
        "error_codes": counts["error_codes"],
        "batches": batches,
        "crash_details": crashes,
        "examples": counts["examples"],
        "wall_seconds": round(time.perf_counter() - started, 1),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
    }
    result["pass"] = (not crashes and all(result[key] == 0 for key in zero_keys) and verify_ok and replay_ok
                      and memory_ok and long_ok and replies_ok and result["calls"] >= args.calls)
    write_json(args.out, result, indent=2)
    print(json.dumps({key: result[key] for key in ("calls", "crashes", *zero_keys, "pass")}))
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""Harness benchmark: what the runner costs per tool round (model time excluded) and oracle episodes/hour.

Writes bench/runner.json. Uses a small synthetic ucsf-pdgm package (tiny volumes: the number measures the
harness -- worker IPC, registry, audit, receipts, PNG encoding -- not loading big studies) and the oracle
agent, which spends no model time, at workers = 1 and 2.

With ``--baseline TREE`` (a checkout of an earlier commit, e.g. ``git archive a785b13 | tar -x -C TREE``) it also
runs ``bench run`` as a user types it -- heuristic agent, UCSF-PDGM demo cohort, Track B, ``--workers 2`` -- from
this tree and from TREE in turn (alternating, so machine load falls on both alike), each on its own synthetic
cohort in ``--cache-dir``: harness seconds per episode (episode wall time minus model time, from each
``result.json``), the CPU seconds of the whole process tree (``wait4``) and its peak RSS (the sum over the tree,
sampled every 50 ms from /proc).

    python scripts/bench_runner.py [--cases N] [--baseline TREE --cache-dir DIR] [--out bench/runner.json]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Testing" / "Python"))

from agents_cases import write_ucsf_package  # noqa: E402

from MedOpenClawLib.bench.agents.oracle import OracleAgent  # noqa: E402
from MedOpenClawLib.bench.episode import EpisodePrompt  # noqa: E402
from MedOpenClawLib.bench.runner import BenchmarkRunner, RunConfig  # noqa: E402


def prompt(spec, case, attachments, max_rounds):
    return EpisodePrompt("You operate a viewer.", attachments.inventory_text, attachments.images)


def run(cases_dir: Path, out: Path, workers: int) -> dict:
    config = RunConfig(module="ucsf-pdgm", agent="oracle", out=out, cases_dir=cases_dir, workers=workers)
    started = time.perf_counter()
    summary = BenchmarkRunner(config, lambda task: OracleAgent(), prompt, progress_stream=io.StringIO()).run()
    wall = time.perf_counter() - started
    per_round, per_episode = [], []
    for path in sorted((out / "episodes").glob("*/result.json")):
        outcome = json.loads(path.read_text())["outcome"]
        per_round.append(outcome["harness_seconds"] / max(outcome["rounds"], 1))
        per_episode.append(outcome["wall_seconds"])
    return {
        "workers": workers,
        "episodes": summary["episodes"],
        "strict": summary["strict"],
        "wall_s": round(wall, 2),
        "episodes_per_hour": round(summary["episodes"] / wall * 3600, 1),
        "harness_ms_per_tool_round_p50": round(statistics.median(per_round) * 1000, 1),
        "harness_ms_per_tool_round_max": round(max(per_round) * 1000, 1),
        "episode_loop_s_p50": round(statistics.median(per_episode), 3),
    }


def tree_rss_mb(root: int) -> float:
    """Resident memory of ``root`` and all its descendants (MiB), from /proc."""
    parents, rss = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)], rss[int(entry.name)] = int(fields[1]), int(fields[21])
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier += children
    return sum(rss.get(pid, 0) for pid in tree) * os.sysconf("SC_PAGE_SIZE") / 2**20


def cli_run(tree: Path, out: Path, cache: Path, limit: int, repeats: int) -> dict:
    """One ``bench run`` from source ``tree``: harness s per episode, CPU s and peak RSS of the process tree."""
    command = [sys.executable, "-m", "MedOpenClawLib.cli", "bench", "run", "--module", "ucsf-pdgm", "--agent",
               "heuristic", "--track", "B", "--workers", "2", "--limit", str(limit), "--repeats", str(repeats),
               "--cache-dir", str(cache), "--out", str(out)]
    environment = {**os.environ, "PYTHONPATH": str(tree / "MedOpenClaw")}
    started = time.perf_counter()
    child = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak, done = [0.0], threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], tree_rss_mb(child.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(child.pid, 0)
    done.set()
    sampler.join()
    wall = time.perf_counter() - started
    error = child.stderr.read().decode(errors="replace")[-400:]
    child.stderr.close()
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: some answer scored wrong, the run itself finished
        raise SystemExit(f"bench run from {tree} failed: {error}")
    harness = [json.loads(path.read_text())["outcome"]["harness_seconds"]
               for path in sorted((out / "episodes").glob("*/result.json"))]
    cpu = usage.ru_utime + usage.ru_stime
    return {"episodes": len(harness), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "cpu_s_per_episode": round(cpu / max(len(harness), 1), 3),
            "peak_tree_rss_mb": round(peak[0], 1), "harness_s_per_episode_mean": round(statistics.mean(harness), 3),
            "harness_s_per_episode_p50": round(statistics.median(harness), 3)}


def versus(baseline: Path, cache: Path, limit: int, repeats: int, rounds: int) -> dict:
    """This tree against ``baseline``, ``rounds`` runs each, alternating, after one uncounted run each (the
    cohort generated or read into the page cache); the medians of the runs."""
    runs: dict[str, list[dict]] = {"this_tree": [], "baseline": []}
    with tempfile.TemporaryDirectory() as scratch:
        for name, tree in (("baseline", baseline), ("this_tree", ROOT)):
            cli_run(tree, Path(scratch) / f"{name}-warm-up", cache, limit, repeats)
        for index in range(rounds):
            for name, tree in (("baseline", baseline), ("this_tree", ROOT)):
                runs[name].append(cli_run(tree, Path(scratch) / f"{name}-{index}", cache, limit, repeats))
                print(name, json.dumps(runs[name][-1]), flush=True)
    medians = {name: {key: round(statistics.median(run[key] for run in values), 3) for key in values[0]}
               for name, values in runs.items()}
    return {"what": f"bench run --agent heuristic --track B --workers 2, {limit} UCSF-PDGM cases x {repeats} "
            "repeats, from each source tree on its own synthetic cohort; medians of the runs",
            "baseline": str(baseline), "runs": runs, "medians": medians,
            "ratio_this_over_baseline": {key: round(medians["this_tree"][key] / medians["baseline"][key], 3)
                                         for key in ("harness_s_per_episode_mean", "cpu_s_per_episode",
                                                     "peak_tree_rss_mb", "wall_s") if medians["baseline"][key]},
            "load_average_at_end": round(os.getloadavg()[0], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=8)
    parser.add_argument("--out", default=str(ROOT / "bench" / "runner.json"))
    parser.add_argument("--baseline", type=Path, help="source tree of an earlier commit to run bench run against")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "medopenclaw",
                        help="synthetic cohort cache shared by both trees (one cohort per generator)")
    parser.add_argument("--limit", type=int, default=6, help="cases per bench run")
    parser.add_argument("--repeats", type=int, default=2, help="repeats per case in each bench run")
    parser.add_argument("--rounds", type=int, default=3, help="bench runs per tree")
    parser.add_argument("--only-baseline", action="store_true", help="keep runner.json's oracle runs")
    args = parser.parse_args()
    if args.only_baseline:
        report = json.loads(Path(args.out).read_text())
        report["versus_baseline"] = versus(args.baseline, args.cache_dir, args.limit, args.repeats, args.rounds)
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
        print(json.dumps(report["versus_baseline"]["ratio_this_over_baseline"]))
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        cases_dir = write_ucsf_package(scratch / "cases", cases=args.cases)
        results = [run(cases_dir, scratch / f"run-w{workers}", workers) for workers in (1, 2)]
    report = {
        "what": "oracle agent on a synthetic ucsf-pdgm package (24x24x16 volumes, 4 sequences); harness time per "
        "tool round = episode wall time minus model time (zero for the oracle) divided by its tool rounds; "
        "episodes/hour include worker start-up, case preload (open_case, baseline renders) and scoring",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "runs": results,
    }
    if args.baseline is not None:
        report["versus_baseline"] = versus(args.baseline, args.cache_dir, args.limit, args.repeats, args.rounds)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

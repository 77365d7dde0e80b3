"""Harness benchmark: what the runner costs per tool round (model time excluded) and oracle episodes/hour.

Writes bench/runner.json. Uses a small synthetic ucsf-pdgm package (tiny volumes: the number measures the
harness -- worker IPC, registry, audit, receipts, PNG encoding -- not loading big studies) and the oracle
agent, which spends no model time, at workers = 1 and 2.

    python scripts/bench_runner.py [--cases N] [--out bench/runner.json]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Testing" / "Python"))

from agents_cases import write_ucsf_package  # noqa: E402

from MedOpenClawLib.bench.agents.oracle import OracleAgent  # noqa: E402
from MedOpenClawLib.bench.episode import EpisodePrompt  # noqa: E402
from MedOpenClawLib.bench.runner import BenchmarkRunner, RunConfig  # noqa: E402


def prompt(case, attachments, max_rounds):
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=8)
    parser.add_argument("--out", default=str(ROOT / "bench" / "runner.json"))
    args = parser.parse_args()
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
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Demo benchmark: the README's first command, ``bash scripts/demo.sh``, on a fresh clone of this repository, phase by
phase, once with no cohort cached (an empty ``MEDOPENCLAW_CACHE``) and once with the cohort it left cached.

The phases are demo.sh's own commands: ``scripts/setup_env.sh --no-node-clients`` (a fresh ``.venv``; warm
package caches, as a second clone on one machine sees them, or cold ones with ``--cold-setup``), the embedded cohort
(``bench cohort --cache``, the call ``bench run`` makes first when the cohort is not cached), ``bench run --module all
--agent oracle`` and ``bench report``. Each phase's wall time, CPU time (user + system of the command and every
process it waited for, from ``wait4``), peak RSS of its largest process and the machine's 1-minute load average
(before, after and the mean of samples every 2 s) are recorded: on a shared machine the CPU seconds are what the wall
time would be on an idle one with one core, and the load says how far the wall time can be trusted.

Writes bench/demo.json. The clone is of the committed HEAD.

    nice -n 10 python scripts/bench_demo.py [--cold-setup] [--out bench/demo.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class LoadSampler:
    """The 1-minute load average sampled every ``every_s`` seconds while a phase runs."""

    def __init__(self, every_s: float = 2.0):
        self.every_s, self.samples = every_s, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.every_s):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        self.before = os.getloadavg()[0]
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.after = os.getloadavg()[0]

    def summary(self) -> dict:
        samples = self.samples or [self.after]
        return {"load_1min_before": round(self.before, 2), "load_1min_after": round(self.after, 2),
                "load_1min_mean": round(sum(samples) / len(samples), 2)}


def phase(command: list[str], cwd: Path, env: dict, log: Path) -> dict:
    """Run one phase (its output to ``log``); its wall and CPU seconds, peak RSS and the load it ran under."""
    with open(log, "ab") as output, LoadSampler() as load:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}): see {log}\n"
                         + log.read_text(errors="replace")[-4000:])
    return {"wall_s": round(wall, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "user_s": round(usage.ru_utime, 1), "system_s": round(usage.ru_stime, 1),
            "peak_rss_mb": round(usage.ru_maxrss / 1024), **load.summary()}


def totals(phases: dict) -> dict:
    return {"wall_s": round(sum(item["wall_s"] for item in phases.values()), 1),
            "cpu_s": round(sum(item["cpu_s"] for item in phases.values()), 1)}


def measure(scratch: Path, cold_setup: bool) -> dict:
    clone, cache = scratch / "clone", scratch / "cohort-cache"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    cache.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in ("MEDOPENCLAW_VENV", "MEDOPENCLAW_DEMO_OUT",
                                                                          "VIRTUAL_ENV", "PYTHONPATH")}
    env["MEDOPENCLAW_CACHE"] = str(cache)  # no cohort cached: a machine that never ran the demo
    env.update(PYTHONPYCACHEPREFIX=str(clone / ".venv" / "pycache"), PYTHONDONTWRITEBYTECODE="")  # as demo.sh runs
    if cold_setup:  # bench/setup.json measures the cold installs; this is for a re-check on another machine
        env.update(UV_CACHE_DIR=str(scratch / "uv-cache"), npm_config_cache=str(scratch / "npm-cache"),
                   PIP_NO_CACHE_DIR="1")
    cli, log = str(clone / ".venv" / "bin" / "medopenclaw"), scratch / "demo.log"
    setup = phase(["bash", "scripts/setup_env.sh", "--no-node-clients"], clone, env, log)
    first = {"set-up": setup,
             "cohort": phase([cli, "bench", "cohort", "--cache"], clone, env, log),
             "run": phase([cli, "bench", "run", "--module", "all", "--agent", "oracle", "--out", "out/demo"],
                          clone, env, log),
             "report": phase(["sh", "-c", f"{cli} bench report out/demo > out/demo/report.json"], clone, env, log)}
    cached = {"set-up": setup,  # a fresh clone's set-up is the same whether a cohort is cached or not
              "run": phase([cli, "bench", "run", "--module", "all", "--agent", "oracle", "--out", "out/demo2"],
                           clone, env, log),
              "report": phase(["sh", "-c", f"{cli} bench report out/demo2 > out/demo2/report.json"], clone, env,
                              log)}
    summary = json.loads((clone / "out" / "demo" / "summary.json").read_text())
    pages = sum(1 for _ in (clone / "out" / "demo" / "report").rglob("*.html"))
    return {"set-up caches": "cold" if cold_setup else "warm",
            "no_cohort_cached": {"phases": first, "total": totals(first)},
            "cohort_cached": {"phases": cached, "total": totals(cached)},
            "episodes": summary["episodes"], "scored": summary["scored"], "task_macro": summary["task_macro"],
            "report_html_pages": pages,
            "cohort_lines": [line for line in log.read_text(errors="replace").splitlines()
                             if line.startswith("cohort")]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold-setup", action="store_true",
                        help="empty uv, npm and pip caches for the set-up (default: the machine's, warm)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "demo.json"))
    args = parser.parse_args()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as scratch:
        result = measure(Path(scratch), args.cold_setup)
    report = {"benchmark": "bash scripts/demo.sh on a fresh clone, phase by phase: no cohort cached, then cached",
              "command": "nice -n 10 python scripts/bench_demo.py" + (" --cold-setup" if args.cold_setup else ""),
              "commit": commit, "python": platform.python_version(), "machine": platform.machine(),
              "cpus": os.cpu_count(), "nice": os.nice(0),
              "note": "cpu_s counts both cores' seconds; on a shared machine read wall_s with the load averages",
              **result}
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({key: report[key] for key in ("no_cohort_cached", "cohort_cached")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

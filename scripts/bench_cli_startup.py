"""CLI start-up benchmark: wall time of ``medopenclaw --help`` and of the sub-commands' ``--help`` in fresh
processes, and which heavy packages each one imports (none may: slicer, vtk, torch belong to the commands that
run a viewer or a model).

Writes bench/cli_startup.json.

    python scripts/bench_cli_startup.py [--runs N] [--out bench/cli_startup.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("slicer", "vtk", "torch", "monai", "scipy", "mcp", "numpy")
COMMANDS = (["--help"], ["bench", "score", "--help"], ["bench", "run", "--help"], ["serve", "--help"],
            ["mcp", "--help"], ["trace", "verify", "--help"])
PROBE = ("import sys, contextlib, io\nfrom MedOpenClawLib.cli import main\n"
         "with contextlib.redirect_stdout(io.StringIO()):\n    try:\n        main(sys.argv[1:])\n"
         "    except SystemExit:\n        pass\n"
         f"print(','.join(name for name in {HEAVY!r} if name in sys.modules))")


def measure(argv: list[str], runs: int, env: dict) -> dict:
    times, imported = [], ""
    for _ in range(runs):
        started = time.perf_counter()
        completed = subprocess.run([sys.executable, "-c", PROBE, *argv], env=env, capture_output=True, text=True,
                                   check=True)
        times.append(time.perf_counter() - started)
        imported = completed.stdout.strip()
    return {"command": " ".join(["medopenclaw", *argv]), "p50_ms": round(statistics.median(times) * 1000, 1),
            "max_ms": round(max(times) * 1000, 1), "runs": runs, "heavy_imports": imported.split(",") if imported
            else []}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--out", default=str(ROOT / "bench" / "cli_startup.json"))
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "MedOpenClaw"), str(ROOT / "MedCopilot")])}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    baseline = {"command": "python -c pass", "ms": round((time.perf_counter() - started) * 1000, 1)}
    results = [measure(argv, args.runs, env) for argv in COMMANDS]
    report = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
              "load_average_1min": round(os.getloadavg()[0], 2),  # a shared machine: read the times with it
              "interpreter_baseline": baseline, "commands": results}
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Set-up benchmark: ``scripts/setup_env.sh`` on a fresh clone of this repository into a fresh virtual environment,
once per installer (uv, as the script uses by default, and pip, its fallback), each with a cold package cache, so
that the times are a new machine's. Records each step's seconds as the script prints them, the wall time, the
load the shared machine was under, and what was installed.

Writes bench/setup.json. The clone is of the committed HEAD.

    python scripts/bench_setup.py [--installers uv pip] [--out bench/setup.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP = re.compile(r"^(set-up \d+/\d+: .*) \.\.\. (\d+) s$")


def measure(installer: str) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"bench-setup-{installer}-") as scratch:
        clone, venv = Path(scratch) / "clone", Path(scratch) / "venv"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        env = {**os.environ, "MEDOPENCLAW_VENV": str(venv), "MEDOPENCLAW_INSTALLER": installer,
               "UV_CACHE_DIR": str(Path(scratch) / "uv-cache"), "PIP_NO_CACHE_DIR": "1"}  # cold caches
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        done = subprocess.run(["bash", str(clone / "scripts" / "setup_env.sh")], env=env, capture_output=True,
                              text=True)
        wall = time.perf_counter() - started
        if done.returncode:
            raise SystemExit(f"setup_env.sh with {installer} failed:\n{done.stdout}{done.stderr}")
        steps = {match[1].replace(str(venv), "$MEDOPENCLAW_VENV"): int(match[2])
                 for match in map(STEP.match, done.stdout.splitlines()) if match}
        installed = json.loads(subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format",
                                               "json"], capture_output=True, text=True, check=True).stdout)
        torch = next((item["version"] for item in installed if item["name"] == "torch"), None)
        return {"installer": installer, "wall_s": round(wall, 1), "steps_s": steps, "packages": len(installed),
                "torch": torch, "load_average_1min_before": round(load_before, 2),
                "load_average_1min_after": round(os.getloadavg()[0], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--installers", nargs="+", choices=("uv", "pip"), default=["uv", "pip"])
    parser.add_argument("--out", default=str(ROOT / "bench" / "setup.json"))
    args = parser.parse_args()
    runs = []
    for installer in args.installers:
        runs.append(measure(installer))
        print(json.dumps(runs[-1]), flush=True)
    report = {"benchmark": "scripts/setup_env.sh on a fresh clone into a fresh venv, cold package caches",
              "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
              "note": "a shared machine: read the times with the load average", "runs": runs}
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

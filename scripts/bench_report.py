"""Benchmark: `bench report` over a set of runs, with and without the evidence views drawn through the viewer
engine (the costly part: one headless session per case, three renders per episode).

Writes bench/report.json. Run: python scripts/bench_report.py RUNS... (e.g. the runs that
scripts/update_readme_results.py leaves under out/results).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "MedOpenClaw"))

from MedOpenClawLib.bench.report import write_report  # noqa: E402
from MedOpenClawLib.core.audit import sha256_file  # noqa: E402


def timed(runs: list[str], out: Path, evidence: bool) -> dict:
    start = time.perf_counter()
    written = write_report(runs, out, evidence=evidence)
    seconds = time.perf_counter() - start
    files = [path for path in out.rglob("*") if path.is_file()]
    pictures = [path for path in files if path.suffix == ".png"]
    return {"seconds": round(seconds, 2), "runs": written["runs"], "episodes": written["episodes"],
            "seconds_per_episode": round(seconds / max(written["episodes"], 1), 3), "files": len(files),
            "megabytes": round(sum(path.stat().st_size for path in files) / 1e6, 2), "png_files": len(pictures),
            "distinct_png_contents": len({sha256_file(path) for path in pictures})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "report.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        result = {
            "benchmark": "bench report: tables, figures and HTML pages over the given runs",
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "load_average_1min_before": round(os.getloadavg()[0], 2)},
            "runs_measured": [Path(run).resolve().relative_to(Path(run).resolve().parents[1]).as_posix()
                              for run in args.runs],
            "without_evidence": timed(args.runs, Path(directory) / "plain", evidence=False),
            "with_evidence": timed(args.runs, Path(directory) / "evidence", evidence=True),
        }
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

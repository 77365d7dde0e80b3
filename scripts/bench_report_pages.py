"""How `bench report` scales to hundreds of episodes: a finished run's episodes are repeated (as repeats r1..rN of
the same cases, traces and images copied) and the report is written with and without evidence views; measured:
seconds per episode page, and the weight of an episode page (HTML bytes, images it links) a browser opens.
Writes bench/report_pages.json.

Run: python scripts/bench_report_pages.py --run out/demo/ucsf-pdgm [--copies 50] [--out /tmp/report-scale]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def replicate(run: Path, out: Path, copies: int) -> int:
    """A copy of ``run`` whose every episode appears ``copies`` times (repeats 1..copies)."""
    if out.exists():
        shutil.rmtree(out)
    (out / "episodes").mkdir(parents=True)
    for name in ("run.json", "summary.json"):
        if (run / name).is_file():
            shutil.copyfile(run / name, out / name)
    count = 0
    for episode in sorted((run / "episodes").glob("*/result.json")):
        result = json.loads(episode.read_text())
        for repeat in range(1, copies + 1):
            episode_id = f"{result['case_id']}__r{repeat}"
            target = out / "episodes" / episode_id
            shutil.copytree(episode.parent, target)
            trace = result.get("trace")
            body = {**result, "episode_id": episode_id, "repeat": repeat,
                    "trace": trace.replace(f"episodes/{episode.parent.name}/", f"episodes/{episode_id}/")
                    if trace else None}
            (target / "result.json").write_text(json.dumps(body))
            count += 1
    return count


def page_weight(report: Path) -> dict:
    pages = sorted((report / "runs").glob("*/*.html"))
    sizes = [page.stat().st_size for page in pages]
    images = [len(re.findall(r'<img src="', page.read_text(encoding="utf-8"))) for page in pages]
    return {"pages": len(pages), "html_bytes_median": int(statistics.median(sizes)), "html_bytes_max": max(sizes),
            "images_per_page_median": statistics.median(images), "images_per_page_max": max(images)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a finished `bench run` directory")
    parser.add_argument("--copies", type=int, default=50, help="times each episode is repeated (default 50)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/report-scale"), help="scratch folder")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "report_pages.json", help="result file")
    args = parser.parse_args(argv)
    from MedOpenClawLib.bench.report import write_report

    run = args.out / "run"
    episodes = replicate(args.run, run, args.copies)
    measured = {"source_run": args.run.name, "episodes": episodes, "machine": f"{platform.machine()}, "
                f"Python {platform.python_version()}"}
    for evidence in (False, True):
        report = args.out / f"report-{'evidence' if evidence else 'plain'}"
        shutil.rmtree(report, ignore_errors=True)
        started = time.perf_counter()
        write_report([run], report, evidence=evidence)
        seconds = time.perf_counter() - started
        measured["with_evidence" if evidence else "without_evidence"] = {
            "seconds": round(seconds, 1), "seconds_per_episode": round(seconds / episodes, 3), **page_weight(report)}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(measured, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

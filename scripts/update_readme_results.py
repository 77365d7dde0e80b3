"""Regenerate the README's "Results" section from the embedded synthetic cohort: run the privileged reference
agent and the two offline baselines on every module, write the report, copy its score figure (and, when a
Chromium is installed, a screenshot of its index page) to docs/, and put Tables 1 and 2 between the README's
results markers.

Run: python scripts/update_readme_results.py [--out out/results] [--skip-runs]   (about 3 min on 2 cores)
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

from MedOpenClawLib.bench.spec import OFFLINE_AGENT_NAMES

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SECTION = re.compile(r"(<!-- results -->\n).*?(<!-- /results -->)", re.S)


def run_cohort(out: Path) -> None:
    from MedOpenClawLib.bench.modules import names

    for agent in OFFLINE_AGENT_NAMES:
        for module in names():
            subprocess.run([sys.executable, "-m", "MedOpenClawLib.cli", "bench", "run", "--module", module,
                            "--agent", agent, "--out", str(out / agent / module)], check=True,
                           stdout=subprocess.DEVNULL)


def results_markdown(out: Path) -> str:
    from MedOpenClawLib.bench.report.formats import markdown
    from MedOpenClawLib.bench.report.runs import find_runs, load_run, run_names
    from MedOpenClawLib.bench.report.tables import table1, table2

    paths = find_runs([out])
    runs = [load_run(path, name) for path, name in zip(paths, run_names(paths)) if "report" not in path.parts]
    return markdown([table1.build(runs), table2.build(runs)]).replace("### Table", "#### Table")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "results")
    parser.add_argument("--skip-runs", action="store_true", help="reuse the runs already under --out")
    args = parser.parse_args(argv)
    if not args.skip_runs:
        run_cohort(args.out)
    from MedOpenClawLib.bench.report import write_report

    report = args.out / "report"
    write_report([args.out / agent for agent in OFFLINE_AGENT_NAMES], report)
    shutil.copyfile(report / "plots" / "scores.png", ROOT / "docs" / "results_scores.png")
    spec = importlib.util.spec_from_file_location("check_report_browser", ROOT / "scripts" / "check_report_browser.py")
    browser_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(browser_check)
    if browser_check.browser() is not None:
        verdict = browser_check.check(report, args.out / "screenshots", docs=ROOT / "docs" / "report_index.png",
                                      widths=(1400,))
        if not verdict["ok"]:
            print("warning: " + "; ".join(verdict["problems"]), file=sys.stderr)
    body = results_markdown(args.out)
    text = README.read_text(encoding="utf-8")
    if not SECTION.search(text):
        print("error: README.md has no <!-- results --> ... <!-- /results --> markers", file=sys.stderr)
        return 2
    README.write_text(SECTION.sub(lambda match: match.group(1) + body + "\n" + match.group(2), text),
                      encoding="utf-8")
    print(f"README results updated from {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

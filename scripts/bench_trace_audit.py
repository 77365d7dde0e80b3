"""Benchmark: the trace audit over real episodes -- the oracle, heuristic and random agents on every module of the
embedded synthetic cohort -- and what it costs per trace.

Writes bench/trace_audit.json: per agent and module the episodes, their findings by code, the evidence fields
grounded and ungrounded, and the audit time per trace (read + audit, mean and max) against the trace size. The
target is that the privileged oracle's episodes carry no finding (the random agent, which cites evidence
drawn inside the volume without looking, is the positive control); ``--runs DIR ...`` audits existing
``bench run`` directories instead of running the agents.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "MedOpenClaw"))

from MedOpenClawLib.bench.modules import get, names  # noqa: E402
from MedOpenClawLib.bench.spec import OFFLINE_AGENT_NAMES  # noqa: E402
from MedOpenClawLib.cli import main  # noqa: E402
from MedOpenClawLib.core.audit import read_trace  # noqa: E402
from MedOpenClawLib.trace_audit import CODES, audit_records  # noqa: E402


def run_agents(out: Path, limit: int) -> list[Path]:
    runs = []
    for agent in OFFLINE_AGENT_NAMES:
        for module in names():
            target = out / f"{agent}-{module}"
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code = main(["bench", "run", "--module", module, "--agent", agent, "--limit", str(limit),
                             "--workers", "1", "--out", str(target)])
            if code != 0:
                raise SystemExit(f"bench run {agent} {module} exited {code}")
            runs.append(target)
    return runs


def audit_run(run: Path) -> dict:
    identity = json.loads((run / "run.json").read_text(encoding="utf-8"))
    findings: Counter = Counter()
    grounded = ungrounded = episodes = with_findings = 0
    seconds, sizes = [], []
    for result_path in sorted(run.glob("episodes/*/result.json")):
        result = json.loads(result_path.read_text(encoding="utf-8"))
        if not result.get("trace"):
            continue
        trace = run / result["trace"]
        started = time.perf_counter()
        report = audit_records(read_trace(trace), get(identity["module"]),
                               ((result.get("score") or {}).get("details") or {}).get("parsed"))
        seconds.append(time.perf_counter() - started)
        sizes.append(trace.stat().st_size)
        episodes += 1
        with_findings += bool(report.findings)
        findings.update(finding.code for finding in report.findings)
        grounded += sum(item.grounded for item in report.provenance)
        ungrounded += sum(not item.grounded for item in report.provenance)
    return {
        "agent": identity.get("agent"), "module": identity.get("module"), "track": identity.get("track"),
        "episodes": episodes, "episodes_with_findings": with_findings,
        "findings": {code: findings.get(code, 0) for code in CODES},
        "evidence_fields": {"grounded": grounded, "ungrounded": ungrounded},
        "audit_ms": {"mean": round(1000 * sum(seconds) / len(seconds), 2) if seconds else None,
                     "max": round(1000 * max(seconds), 2) if seconds else None},
        "trace_kib": {"mean": round(sum(sizes) / len(sizes) / 1024, 1) if sizes else None,
                      "max": round(max(sizes) / 1024, 1) if sizes else None},
    }


def main_bench() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", type=Path, help="audit these bench run directories instead")
    parser.add_argument("--limit", type=int, default=2, help="cases per module when running the agents")
    parser.add_argument("--keep", type=Path, help="run the agents into this folder and keep the runs (default: a "
                        "temporary folder)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "trace_audit.json")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        runs = args.runs or run_agents(args.keep or Path(scratch), args.limit)
        rows = [audit_run(run) for run in runs]
    oracle = sum(row["episodes_with_findings"] for row in rows if row["agent"] == "oracle")
    document = {
        "benchmark": "trace audit (provenance + F1-F4/G5 findings) of real episodes; target: no oracle finding",
        "cases_per_module": None if args.runs else args.limit,
        "runs": rows,
        "oracle_episodes_with_findings": oracle,
        "passed": oracle == 0,
        "seconds": round(time.perf_counter() - started, 1),
    }
    args.out.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps({"out": str(args.out), "passed": document["passed"],
                      "oracle_episodes_with_findings": oracle}))
    return 0 if document["passed"] else 1


if __name__ == "__main__":
    sys.exit(main_bench())

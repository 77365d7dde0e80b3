"""What ``medopenclaw trace audit`` does once its flags are parsed (:mod:`.commands` registers them); imported
only when it runs (:func:`...cli.deferred`): the audit's numpy would slow every ``trace`` command's start."""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from ..core.audit import iter_trace
from . import SEVERITIES, audit_records, format_report, stability


def _records(path: Path) -> Iterator:
    """The trace's records one at a time (the audit keeps what it needs, not the whole trace)."""
    try:
        yield from iter_trace(path)
    except (OSError, ValueError) as error:  # JSONDecodeError, UnicodeDecodeError, a line nested too deeply
        raise ValueError(f"{path} is not a readable trace: {error}") from error


def _audit(records: Iterator, args: argparse.Namespace, parsed: dict | None = None):
    """The audit of ``records`` under the module ``--module`` names, else the trace header's."""
    return audit_records(records, parsed=parsed, lookup=lambda header: args.module_spec(args.module or header))


def _run_reports(run: Path, args: argparse.Namespace) -> list[tuple[dict, dict]]:
    """(episode result, audit JSON) of every episode of a run directory that has a trace."""
    reports = []
    for path in sorted(run.glob("episodes/*/result.json")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ValueError(f"{path}: unreadable episode result ({error})") from error
        if not isinstance(result, dict) or not isinstance(result.get("trace"), str):
            continue
        parsed = ((result.get("score") or {}).get("details") or {}).get("parsed")
        report = _audit(_records(run / result["trace"]), args, parsed)
        reports.append((result, {**report.to_json(), "trace_dir": str((run / result["trace"]).parent)}))
    if not reports:
        raise ValueError(f"{run} holds no episode with a trace (episodes/*/result.json)")
    return reports


def _run_document(reports: list[tuple[dict, dict]]) -> dict:
    cases: dict[str, list[dict]] = defaultdict(list)
    for result, audit in reports:
        cases[str(result.get("case_id"))].append({"repeat": result.get("repeat"), **audit})
    return {
        "episodes": [{"episode_id": result.get("episode_id"), "findings": audit["findings"],
                      "grounded": audit["grounded"], "ungrounded": audit["ungrounded"],
                      "milestones": audit["milestones"]} for result, audit in reports],
        "stability": {case: stability(runs) for case, runs in sorted(cases.items()) if len(runs) > 1},
    }


def _run_text(document: dict) -> str:
    lines = []
    for episode in document["episodes"]:
        codes = ", ".join(sorted({finding["code"] for finding in episode["findings"]})) or "no finding"
        lines.append(f"{episode['episode_id']}: {codes} ({episode['grounded']} evidence fields grounded, "
                     f"{episode['ungrounded']} ungrounded)")
    for case, result in document["stability"].items():
        share = "n/a" if result["complete_share"] is None else f"{result['complete_share']:.0%}"
        lines.append(f"{case}: {result['runs']} runs, workflow complete in {share}, final-view agreement "
                     f"{result['final_view_agreement']}, runs without a mask {result['runs_without_mask']}")
    return "\n".join(lines)


def run_audit(args: argparse.Namespace) -> int:
    if args.trace.is_dir():
        document = _run_document(_run_reports(args.trace, args))
        print(json.dumps(document, indent=1, sort_keys=True) if args.json else _run_text(document))
        findings = [finding for episode in document["episodes"] for finding in episode["findings"]]
    else:
        report = _audit(_records(args.trace), args)
        print(json.dumps(report.to_json(), indent=1, sort_keys=True) if args.json else format_report(report))
        findings = [finding.to_json() for finding in report.findings]
    if args.fail_on is None:
        return 0
    worst = SEVERITIES[: SEVERITIES.index(args.fail_on) + 1]
    return 1 if any(finding["severity"] in worst for finding in findings) else 0

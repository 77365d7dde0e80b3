"""``medopenclaw trace audit TRACE``: the trace audit of one episode, as text or JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_audit_command(trace_commands) -> None:
    """Register ``audit`` under the ``trace`` command's sub-parsers."""
    audit = trace_commands.add_parser(
        "audit", help="evidence provenance and failure-mode findings (F1-F4, G5) of one episode trace")
    audit.add_argument("trace", type=Path)
    audit.add_argument("--module", default=None, help="benchmark module (default: the trace header's)")
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    audit.add_argument("--fail-on", choices=("high", "medium", "low"), default=None,
                       help="exit 1 when a finding of this severity or worse is present")
    audit.set_defaults(func=run_audit)


def run_audit(args: argparse.Namespace) -> int:
    from ..audit import read_trace
    from . import SEVERITIES, audit_records, format_report

    try:
        records = read_trace(args.trace)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{args.trace} is not a readable trace: {error}") from error
    report = audit_records(records, args.module)
    print(json.dumps(report.to_json(), indent=1, sort_keys=True) if args.json else format_report(report))
    if args.fail_on is None:
        return 0
    worst = SEVERITIES[: SEVERITIES.index(args.fail_on) + 1]
    return 1 if any(finding.severity in worst for finding in report.findings) else 0

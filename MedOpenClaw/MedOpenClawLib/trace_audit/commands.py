"""``medopenclaw trace audit TRACE|RUN_DIR``: the trace audit of one episode, or of every episode of a ``bench run``
directory with the stability of each case run more than once (``bench run --repeats N``), as text or JSON. This
file registers the flags; :mod:`.audit_command` runs the audit."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..cli import deferred, user_path

if TYPE_CHECKING:
    from . import ModuleKnowledge


def add_audit_command(trace_commands, module_spec: Callable[[str | None], ModuleKnowledge | None]) -> None:
    """Register ``audit`` under the ``trace`` command's sub-parsers; ``module_spec`` gives the spec of a module
    name (None for a name no module defines): the caller's, so this package imports nothing of the bench."""
    audit = trace_commands.add_parser(
        "audit", help="evidence provenance and failure-mode findings (F1-F4, G5) of a trace or a bench run")
    audit.add_argument("trace", type=user_path, help="an episode trace (.jsonl), or a bench run directory")
    audit.add_argument("--module", default=None, help="benchmark module (default: the trace header's)")
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    audit.add_argument("--fail-on", choices=("high", "medium", "low"), default=None,
                       help="exit 1 when a finding of this severity or worse is present")
    audit.set_defaults(func=deferred("MedOpenClawLib.trace_audit.audit_command:run_audit"), module_spec=module_spec)

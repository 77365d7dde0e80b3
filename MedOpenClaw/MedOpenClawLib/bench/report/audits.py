"""Each episode's trace audit as the report reads it, and the per-episode values of the findings table.

An episode's audit is its ``result.json`` ``audit`` block, or -- for runs written before the audit existed --
recomputed from its trace. ``finding:<code>`` is 1 when the episode has at least one finding of that code;
``ungrounded_share`` is the share of the answer's evidence fields nothing grounds; ``milestones_complete`` is defined
for episodes whose workflow was judged (its operations offered).
"""

from __future__ import annotations

from ...trace_audit import CODES, audit_records
from ..spec import ModuleSpec

FINDING_METRICS = tuple(f"finding:{code}" for code in CODES)


def episode_audit(spec: ModuleSpec | None, result: dict, parsed: dict, records: list[dict]) -> dict:
    """The episode's audit block (recomputed from ``records`` when the result predates the audit)."""
    audit = result.get("audit")
    if isinstance(audit, dict) and isinstance(audit.get("findings"), list):
        return audit
    return audit_records(records, spec, parsed).to_json()


def audit_metrics(audit: dict) -> dict[str, float | None]:
    """Per-episode values of the findings table."""
    codes = {finding.get("code") for finding in audit.get("findings", []) if isinstance(finding, dict)}
    metrics: dict[str, float | None] = {f"finding:{code}": float(code in codes) for code in CODES}
    metrics["finding:any"] = float(bool(codes))
    fields = [item for item in audit.get("provenance") or [] if isinstance(item, dict)]
    metrics["ungrounded_share"] = (sum(not item.get("grounded") for item in fields) / len(fields)) if fields else None
    progress = audit.get("milestones")
    metrics["milestones_complete"] = float(bool(progress.get("complete"))) if isinstance(progress, dict) else None
    return metrics

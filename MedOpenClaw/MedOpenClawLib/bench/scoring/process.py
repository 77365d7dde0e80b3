"""Process metrics from an episode's audit trace: how the agent got to its answer, not only whether it was
right.

Definitions (adapted from ABRA's Planning/Execution, MedCTA's step metrics and MedImageOSWorld's PR/INVALID):

- planning_f1: F1 between the multiset of tool names the agent called and the module's reference multiset
  (order-free, as in ABRA), plus ABRA's redundancy penalty reported separately (0.05 per call beyond the
  reference multiset, capped at 0.30).
- tool_success: share of agent calls with status ok. argument_validity: share of calls not rejected for their
  arguments or tool name (``invalid_argument``, ``unknown_action``, ``not_on_track``; MedCTA ArgAcc).
- turn_efficiency: min(1, reference length / calls). error_recovery: share of failed calls whose next agent
  call succeeds and is not the identical call repeated (ABRA R_err); null when nothing failed.
- execution: ABRA's weighting 0.40 success + 0.20 arguments + 0.25 turns + 0.15 recovery (recovery = 1 when
  nothing failed).
- progress_rate: share of the module's workflow stages reached by a successful call (MedImageOSWorld PR); the
  last stage is a parsed final answer.
- observation cost: images returned to the agent and model tokens from ``model_output`` receipts.
- budget_exhausted: a call was refused with ``budget_exhausted`` or the trace's end event says so.
- invalid: the trace holds an ``invalid`` / ``environment_fault`` event; such episodes are excluded from every
  denominator.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ..spec import ModuleSpec

ARGUMENT_ERRORS = ("invalid_argument", "unknown_action", "not_on_track", "invalid_json")
INVALID_EVENTS = ("invalid", "environment_fault")
TOKEN_KEYS = {
    "input_tokens": ("input_tokens", "prompt_tokens"),
    "output_tokens": ("output_tokens", "completion_tokens"),
}

# building blocks of the module specs' reference tools and workflow stages
RADIOLOGY_REFERENCE = ("observe", "select_volume", "scroll", "set_slice_offset", "image_coords_to_ras")
PATHOLOGY_REFERENCE = ("zoom", "pan", "zoom", "capture_viewer", "viewer_point_to_wsi_coordinate")
RADIOLOGY_LOCALIZE = frozenset({"image_coords_to_ras", "jump"})
PATHOLOGY_STAGES = (("navigate", frozenset({"zoom", "pan"})),
                    ("localize", frozenset({"viewer_point_to_wsi_coordinate"})))


def multiset_f1(predicted: Iterable[str], reference: Iterable[str]) -> float:
    predicted, reference = Counter(predicted), Counter(reference)
    overlap = sum((predicted & reference).values())
    if overlap == 0:
        return 0.0
    precision = overlap / sum(predicted.values())
    recall = overlap / sum(reference.values())
    return round(2 * precision * recall / (precision + recall), 4)


def _error_code(record: dict) -> str | None:
    error = record.get("error") or {}
    return error.get("code") if isinstance(error, dict) else None


def _tokens(records: list[dict]) -> dict[str, int]:
    totals = {"input_tokens": 0, "output_tokens": 0}
    for record in records:
        if record.get("kind") != "model_output":
            continue
        payload = record.get("payload") or {}
        usage = payload.get("usage") or {}
        for total_key, names in TOKEN_KEYS.items():
            for name in names:
                if isinstance(usage.get(name), (int, float)):
                    totals[total_key] += int(usage[name])
                    break
    return totals


def invalid_reason(records: list[dict]) -> str | None:
    for record in records:
        if record.get("kind") in INVALID_EVENTS:
            payload = record.get("payload") or {}
            return str(payload.get("reason") or record.get("kind"))
    return None


def process_metrics(
    spec: ModuleSpec, records: list[dict], answered: bool, reference: Iterable[str] | None = None
) -> dict:
    """Process metrics of one episode of ``spec``'s module; ``answered`` is whether the final response parsed to
    an answer."""
    reference = list(reference if reference is not None else spec.reference_tools)
    calls = [
        record for record in records if record.get("kind") == "action" and record.get("actor") == "agent"
    ]
    names = [record.get("action") for record in calls]
    ok = [record.get("status") == "ok" for record in calls]
    codes = [_error_code(record) for record in calls]
    failures = [index for index, success in enumerate(ok) if not success]
    recovered = [
        index
        for index in failures
        if index + 1 < len(calls)
        and ok[index + 1]
        and (names[index + 1], calls[index + 1].get("arguments"))
        != (names[index], calls[index].get("arguments"))
    ]
    extra_calls = sum((Counter(names) - Counter(reference)).values())
    tool_success = sum(ok) / len(calls) if calls else None
    argument_validity = sum(code not in ARGUMENT_ERRORS for code in codes) / len(calls) if calls else None
    turn_efficiency = min(1.0, len(reference) / len(calls)) if calls else None
    error_recovery = len(recovered) / len(failures) if failures else None
    execution = None
    if calls:
        execution = round(
            0.40 * tool_success
            + 0.20 * argument_validity
            + 0.25 * turn_efficiency
            + 0.15 * (1.0 if error_recovery is None else error_recovery),
            4,
        )
    done = {name for name, success in zip(names, ok) if success}
    reached = {stage: bool(done & tools) for stage, tools in spec.stages}
    reached["answer"] = answered
    ends = [record for record in records if record.get("kind") in ("episode_end", "session_end")]
    exhausted = "budget_exhausted" in codes or any(
        (record.get("payload") or {}).get("budget_exhausted") for record in ends
    )
    return {
        "calls": len(calls),
        "planning_f1": multiset_f1(names, reference),
        "redundancy_penalty": round(min(0.30, 0.05 * extra_calls), 4),
        "tool_success": _round(tool_success),
        "argument_validity": _round(argument_validity),
        "turn_efficiency": _round(turn_efficiency),
        "error_recovery": _round(error_recovery),
        "execution": execution,
        "stages": reached,
        "progress_rate": round(sum(reached.values()) / len(reached), 4),
        "images": sum(len((record.get("result") or {}).get("images") or []) for record in calls),
        **_tokens(records),
        # tool calls written as text, empty replies, answers only in reasoning, calls on the answer turn
        "protocol_deviations": sum(len((record.get("payload") or {}).get("deviations") or [])
                                   for record in records if record.get("kind") == "model_output"),
        "budget_exhausted": bool(exhausted),
        "invalid": invalid_reason(records),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


PROCESS_KEYS = (
    "calls",
    "planning_f1",
    "tool_success",
    "argument_validity",
    "turn_efficiency",
    "error_recovery",
    "execution",
    "progress_rate",
    "images",
    "input_tokens",
    "output_tokens",
    "protocol_deviations",
)


def aggregate_process(metrics: Iterable[dict]) -> dict:
    """Means over valid episodes (nulls skipped per key) plus the budget-exhaustion rate and INVALID count."""
    metrics = list(metrics)
    valid = [item for item in metrics if not item.get("invalid")]
    summary: dict = {"episodes": len(valid), "invalid": len(metrics) - len(valid)}
    for key in PROCESS_KEYS:
        values = [item[key] for item in valid if item.get(key) is not None]
        summary[key] = round(sum(values) / len(values), 4) if values else None
    summary["budget_exhaustion"] = (
        round(sum(item["budget_exhausted"] for item in valid) / len(valid), 4) if valid else None
    )
    return summary

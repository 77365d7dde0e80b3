"""Module-level aggregation: MedFlow-Bench's Task / Strict / Loc columns plus each module spec's sub-metrics
(the Table 5 sub-columns).

INVALID episodes (environment faults) are excluded from every denominator and counted separately, as in
MedImageOSWorld; Loc averages only over cases inside the module's Loc denominator and is null for a module without a
localization rule.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..spec import ModuleSpec
from .rules import CaseScore


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _scorable_mean(scores: list[CaseScore], *path: str) -> float | None:
    """Mean of one per-case sub-score (``details[path...]``) over the cases where it is scorable: a case whose
    reference has no value there (a clinical grade "Not Collected", an evidence field without its segmentation)
    holds None or nothing, and leaves that column's denominator instead of crashing the aggregation."""
    values = []
    for score in scores:
        value = score.details
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            values.append(float(value))
    return _mean(values)


def aggregate(scores: Iterable[CaseScore], spec: ModuleSpec) -> dict:
    """Aggregate the case scores of ``spec``'s module; raises ValueError for a score of another module."""
    scores = list(scores)
    others = sorted({score.module for score in scores} - {spec.name})
    if others:
        raise ValueError(f"cannot aggregate scores of {', '.join(others)} with {spec.name}'s")
    module = spec.name if scores else None
    has_loc = bool(scores) and spec.has_loc
    valid = [score for score in scores if not score.invalid]
    loc_values = [score.loc for score in valid if score.loc is not None]
    result = {
        "module": module,
        "n": len(valid),
        "task": _mean([score.task for score in valid]),
        "strict": _mean([score.strict for score in valid]),
        "loc": _mean(loc_values) if has_loc else None,
        "loc_n": len(loc_values) if has_loc else 0,
        "invalid": len(scores) - len(valid),
        "parse_failures": sum(1 for score in valid if score.parse_errors),
    }
    for metric in spec.sub_metrics if scores else ():  # e.g. subtasks (Table 5)
        result[metric.key] = _scorable_mean(valid, *metric.path)
    return result

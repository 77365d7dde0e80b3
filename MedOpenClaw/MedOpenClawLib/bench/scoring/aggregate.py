"""Module-level aggregation: MedFlow-Bench's Task / Strict / Loc columns plus each module spec's sub-metrics
(the Table 5 sub-columns).

INVALID episodes (environment faults) are excluded from every denominator and counted separately, as in
MedImageOSWorld; Loc averages only over cases inside the module's Loc denominator and is null for a module without a
localization rule.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..modules import get
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


def aggregate(scores: Iterable[CaseScore]) -> dict:
    """Aggregate one module's case scores; raises ValueError when modules are mixed."""
    scores = list(scores)
    modules = {score.module for score in scores}
    if len(modules) > 1:
        raise ValueError(f"cannot aggregate scores of several modules: {sorted(modules)}")
    module = modules.pop() if modules else None

    spec = get(module) if module is not None else None
    has_loc = spec is not None and spec.has_loc
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
    for metric in spec.sub_metrics if spec is not None else ():  # e.g. subtasks (Table 5)
        result[metric.key] = _scorable_mean(valid, *metric.path)
    return result

"""Module-level aggregation: the paper's Task / Strict / Loc columns plus the Table 5 sub-columns.

INVALID episodes (environment faults) are excluded from every denominator and counted separately, as in
MedImageOSWorld; Loc averages only over cases inside the module's Loc denominator and is null for LUMIERE.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..labels import LUMIERE_EVIDENCE_FIELDS, NSCLC_QUESTIONS
from .rules import MODULES_WITH_LOC, CaseScore


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _scorable_mean(scores: list[CaseScore], *path: str) -> float | None:
    """Mean of one per-case sub-score (``details[path...]``) over the cases where it is scorable: a case whose
    reference has no value there (an NSCLC grade "Not Collected", a LUMIERE field without its segmentation)
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
    valid = [score for score in scores if not score.invalid]
    loc_values = [score.loc for score in valid if score.loc is not None]
    result = {
        "module": module,
        "n": len(valid),
        "task": _mean([score.task for score in valid]),
        # a case without reference evidence (a BRACS slide without a GeoJSON export) has no Strict: not counted
        "strict": _mean([score.strict for score in valid if score.strict is not None]),
        "strict_n": sum(1 for score in valid if score.strict is not None),
        "loc": _mean(loc_values) if module in MODULES_WITH_LOC else None,
        "loc_n": len(loc_values) if module in MODULES_WITH_LOC else 0,
        "invalid": len(scores) - len(valid),
        "parse_failures": sum(1 for score in valid if score.parse_errors),
    }
    if module == "nsclc":
        for qid, _, _ in NSCLC_QUESTIONS:
            result[qid] = _scorable_mean(valid, "questions", qid)
    if module == "lumiere":
        for name in LUMIERE_EVIDENCE_FIELDS:
            result[name] = _scorable_mean(valid, "fields", name)
    if module == "camelyon17":
        for key in ("tumor_presence", "largest_metastasis"):
            result[key] = _scorable_mean(valid, key)
    return result

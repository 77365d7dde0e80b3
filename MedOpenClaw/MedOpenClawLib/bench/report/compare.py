"""``bench compare RUN_A RUN_B``: two runs on the same cases, compared case by case.

For every module both hold and every metric it scores: each run's case-level mean and interval, the paired
difference A - B over the matched cases (BCa over the per-case differences, :mod:`.stats`) with an exact paired
test (McNemar's exact test where every matched value is 0 or 1, a sign-flip permutation test otherwise), and each
run's Task - Strict gap -- the answer right without checkable evidence -- paired over its own cases.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ...core.sinks import terminal_text
from ..cases import CaseFormatError
from ..modules import get, names
from .runs import Run, case_values, find_runs, load_run, run_names
from .stats import Estimate, estimate, paired_difference, paired_test


@dataclass
class MetricComparison:
    metric: str
    label: str
    first: Estimate
    second: Estimate
    difference: Estimate | None  # A - B over the matched cases; None when they share none
    test: object  # stats.PairedTest | None


def metrics_of(module: str) -> list[tuple[str, str]]:
    """(metric, label): the module's scores and the sub-metrics of its detail table."""
    if module not in names():
        return [("task", "Task"), ("strict", "Strict"), ("loc", "Loc.")]
    spec = get(module)
    labels = {"task": "Task", "strict": "Strict", "loc": "Loc."} | {item.key: item.label for item in spec.sub_metrics}
    keys = [*spec.metrics, *(key for key in spec.detail_columns if key not in spec.metrics)]
    return [(key, labels[key]) for key in keys if key in labels]


def gap(runs: list[Run], key: str) -> Estimate | None:
    """Task - Strict of the same episodes, paired over the run's cases."""
    task, strict = (estimate(case_values(runs, metric), f"{key}|{metric}") for metric in ("task", "strict"))
    if task.value is None or strict.value is None:
        return None
    paired = paired_difference(task, strict, f"{key}|gap")
    return None if paired is None else paired.difference


def compare_module(first: list[Run], second: list[Run], module: str) -> list[MetricComparison]:
    rows = []
    for metric, label in metrics_of(module):
        key = f"compare|{module}|{metric}"
        a = estimate(case_values(first, metric), f"{key}|a")
        b = estimate(case_values(second, metric), f"{key}|b")
        if a.value is None and b.value is None:
            continue
        paired = paired_difference(a, b, f"{key}|delta") if a.value is not None and b.value is not None else None
        test = paired_test(a.cases, b.cases, f"{key}|test") if paired is not None else None
        rows.append(MetricComparison(metric, label, a, b, None if paired is None else paired.difference, test))
    return rows


def load(path: str | os.PathLike) -> dict[str, list[Run]]:
    """module -> the runs found at ``path`` (a run, or a multi-module `bench run --out`)."""
    found = find_runs([path])
    by_module: dict[str, list[Run]] = {}
    for run in (load_run(directory, name) for directory, name in zip(found, run_names(found))):
        by_module.setdefault(run.module, []).append(run)
    return by_module


def interval_text(value: Estimate | None, signed: bool = False) -> str:
    if value is None or value.value is None:
        return "—"
    sign = "+" if signed else ""
    text = f"{value.value:{sign}.3f}"
    if value.low is not None:
        text += f" [{value.low:{sign}.2f}, {value.high:{sign}.2f}]"
    return text


def compare(first_path: str | os.PathLike, second_path: str | os.PathLike) -> tuple[str, dict]:
    """(the text `bench compare` prints, the same as JSON)."""
    first, second = load(first_path), load(second_path)
    shared = [module for module in first if module in second]
    if not shared:
        raise CaseFormatError(f"{first_path} ({', '.join(first)}) and {second_path} ({', '.join(second)}) "
                              "share no module")
    lines = [f"A = {terminal_text(str(Path(first_path)))}", f"B = {terminal_text(str(Path(second_path)))}",
             "A - B: paired over the cases both runs scored (95% BCa); test: McNemar exact (every value 0/1) or "
             "sign-flip permutation", ""]
    body: dict = {"a": str(first_path), "b": str(second_path), "modules": {}}
    for module in shared:
        rows = compare_module(first[module], second[module], module)
        gaps = {side: gap(runs, f"gap|{side}|{module}") for side, runs in (("a", first[module]), ("b", second[module]))}
        matched = max((row.difference.n for row in rows if row.difference is not None), default=0)
        lines.append(f"{module}: {matched} matched cases")
        lines.append(f"  {'metric':<18}{'A':<24}{'B':<24}{'A - B':<28}test")
        for row in rows:
            test = "—" if row.test is None else f"{row.test.name} p={row.test.p_value:.4g} ({row.test.detail})"
            n = "" if row.difference is None else f" n={row.difference.n}"
            lines.append(f"  {row.label:<18}{interval_text(row.first):<24}{interval_text(row.second):<24}"
                         f"{(interval_text(row.difference, True) + n):<28}{test}")
        lines.append(f"  Task - Strict gap: A {interval_text(gaps['a'], True)}, B {interval_text(gaps['b'], True)} "
                     "(paired over each run's cases)")
        lines.append("")
        body["modules"][module] = {
            "matched": matched,
            "metrics": {row.metric: {"a": _json(row.first), "b": _json(row.second), "difference": _json(row.difference),
                                     "test": None if row.test is None else {"name": row.test.name,
                                                                            "p_value": row.test.p_value,
                                                                            "detail": row.test.detail}}
                        for row in rows},
            "task_strict_gap": {side: _json(value) for side, value in gaps.items()},
        }
    only = sorted(set(first) ^ set(second))
    if only:
        lines.append(f"not compared (in one run only): {', '.join(only)}")
    return "\n".join(lines).rstrip() + "\n", body


def _json(value: Estimate | None) -> dict | None:
    if value is None or value.value is None:
        return None
    return {"value": value.value, "ci_low": value.low, "ci_high": value.high, "n": value.n, "interval": value.method}

"""Report figures (matplotlib, Agg backend), each written as PNG and SVG; every mean and interval comes from the
same case-level estimates as the tables (:func:`.tables.grouping.cell_estimate`).

- scores: Task / Strict / Loc per module with 95% intervals over cases, one bar per agent/model/track.
- task_vs_strict: the evidence gap (points below the diagonal answered right without checkable evidence).
- process: per-episode distributions of tool calls, images viewed, model tokens and cost.
- budget: score against the budget (tool calls, else rounds), when runs differ in budget.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..modules import get, names
from .canvas import pyplot as _pyplot
from .canvas import save as _save
from .milestones import milestone_plots
from .runs import Run
from .tables.grouping import budget_of, cell_estimate, main_runs, row_key

PROCESS_PANELS = (("calls", "tool calls"), ("images", "images viewed"), ("tokens", "model tokens (in + out)"),
                  ("cost_usd", "cost (USD)"))


def row_label(run: Run) -> str:
    name = f"{run.model} [{run.agent}]" if run.model else run.agent
    return f"{name} · Track {run.track}" + (" †" if run.privileged else "")


def _rows(runs: list[Run]) -> dict[str, dict[str, list[Run]]]:
    """label -> module -> runs at the row's largest budget (the main-table selection)."""
    rows = {}
    for _, by_module in sorted(main_runs(runs).items(), key=lambda item: str(item[0])):
        first = next(iter(by_module.values()))[0]
        rows[row_label(first)] = by_module
    return rows


def mark_zero_and_undefined(axis, positions, values, width: float, colour) -> None:
    """A score of 0 has no bar to see and an undefined one (Loc. without a localization rule, no episode) has none
    either: 0 gets a thick line at the axis and a '0', undefined an 'n/a', so the two never look alike."""
    for position, value in zip(positions, values):
        if np.isnan(value):
            axis.text(position, 0.02, "n/a", ha="center", va="bottom", fontsize=7, color="#666", rotation=90)
        elif value == 0:
            axis.plot([position - width * 0.45, position + width * 0.45], [0.004, 0.004], color=colour,
                      linewidth=3, solid_capstyle="butt")
            axis.text(position, 0.02, "0", ha="center", va="bottom", fontsize=7, color="#333")


def error_bar(cell) -> list[list[float]]:
    """matplotlib's [[below], [above]] of an estimate (no bar where it has no interval)."""
    if cell.low is None:
        return [[0.0], [0.0]]
    return [[cell.value - cell.low], [cell.high - cell.value]]


def scores_plot(runs: list[Run], out_dir: Path) -> list[str]:
    pyplot = _pyplot()
    rows = _rows(runs)
    modules = [module for module in names() if any(module in by_module for by_module in rows.values())]
    figure, axes = pyplot.subplots(3, 1, figsize=(max(7.5, 1.7 * len(modules) + 2.5), 9.5), sharex=True)
    width = 0.8 / max(len(rows), 1)
    for axis, metric in zip(axes, ("task", "strict", "loc")):
        for index, (label, by_module) in enumerate(rows.items()):
            values, lows, highs = [], [], []
            for module in modules:
                module_runs = by_module.get(module) or []
                cell = cell_estimate(module_runs, metric, f"plot|{label}|{module}|{metric}")
                low, high = cell.interval
                values.append(np.nan if cell.value is None else cell.value)
                lows.append(0.0 if low is None else cell.value - low)
                highs.append(0.0 if high is None else high - cell.value)
            positions = np.arange(len(modules)) - 0.4 + width * (index + 0.5)
            bars = axis.bar(positions, values, width, yerr=[lows, highs], capsize=2, label=label)
            mark_zero_and_undefined(axis, positions, values, width, bars.patches[0].get_facecolor())
        axis.set_ylabel({"task": "Task", "strict": "Strict", "loc": "Loc."}[metric])
        axis.set_ylim(0, 1.05)
        axis.grid(axis="y", alpha=0.3)
    axes[-1].set_xticks(np.arange(len(modules)), [get(module).title for module in modules])
    axes[0].legend(fontsize="small", loc="lower left", bbox_to_anchor=(0.0, 1.02), ncol=2)
    figure.suptitle("Scores per module (mean over cases, 95% CI; n/a: not defined for that module or run)", y=1.0)
    figure.tight_layout()
    return _save(figure, out_dir, "scores")


def task_vs_strict_plot(runs: list[Run], out_dir: Path) -> list[str]:
    pyplot = _pyplot()
    figure, axis = pyplot.subplots(figsize=(6.5, 5))
    axis.plot([0, 1], [0, 1], color="#999", linewidth=1, linestyle="--", label="Strict = Task")
    markers = dict(zip(names(), itertools.cycle("osD^v")))
    drawn = set()  # the legend lists only the modules and rows that have a point
    for index, (label, by_module) in enumerate(_rows(runs).items()):
        colour = f"C{index % 10}"
        points = 0
        for module, module_runs in by_module.items():
            task = cell_estimate(module_runs, "task", f"tvs|{label}|{module}|t")
            strict = cell_estimate(module_runs, "strict", f"tvs|{label}|{module}|s")
            if task.value is None or strict.value is None:
                continue
            axis.errorbar(task.value, strict.value, xerr=error_bar(task), yerr=error_bar(strict), fmt=markers[module],
                          color=colour, capsize=2, alpha=0.85)
            drawn.add(module)
            points += 1
        if points:
            axis.plot([], [], "s", color=colour, label=label)
    for module, marker in markers.items():
        if module in drawn:
            axis.plot([], [], marker, color="#444", fillstyle="none", label=get(module).title)
    axis.set_xlim(-0.02, 1.02)
    axis.set_ylim(-0.02, 1.02)
    axis.set_xlabel("Task (answer only)")
    axis.set_ylabel("Strict (answer + evidence)")
    axis.set_title("Task vs Strict: the evidence gap")
    axis.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    axis.grid(alpha=0.3)
    return _save(figure, out_dir, "task_vs_strict")


def process_plot(runs: list[Run], out_dir: Path) -> list[str]:
    pyplot = _pyplot()
    rows = _rows(runs)
    figure, axes = pyplot.subplots(1, len(PROCESS_PANELS), figsize=(4.2 * len(PROCESS_PANELS), 4.2))
    for axis, (metric, title) in zip(axes, PROCESS_PANELS):
        data, labels = [], []
        for label, by_module in rows.items():
            episodes = [episode for module_runs in by_module.values() for run in module_runs for episode in run.scored]
            if metric == "tokens":  # episodes that called a model (offline agents call none)
                values = [(episode.metrics.get("input_tokens") or 0) + (episode.metrics.get("output_tokens") or 0)
                          for episode in episodes if episode.metrics.get("model_calls")
                          or episode.metrics.get("input_tokens") or episode.metrics.get("output_tokens")]
            else:
                values = [episode.metrics[metric] for episode in episodes if episode.metrics.get(metric) is not None]
            if values:
                data.append(values)
                labels.append(label)
        axis.set_title(title)
        if not data:
            axis.text(0.5, 0.5, "not recorded by these runs", ha="center", va="center", transform=axis.transAxes)
            axis.set_xticks([])
            continue
        axis.boxplot(data, orientation="horizontal", showmeans=True)
        axis.set_yticks(np.arange(1, len(labels) + 1), labels, fontsize="x-small")
        axis.grid(axis="x", alpha=0.3)
    for axis in axes[1:]:
        axis.tick_params(labelleft=True)
    figure.suptitle("Process metrics per episode (box: quartiles, triangle: mean)")
    figure.tight_layout()
    return _save(figure, out_dir, "process")


def budget_label(budget: tuple) -> str:
    calls, rounds = budget
    return f"{rounds} rounds" if calls == float("inf") else f"{int(calls)} calls"


def budget_plot(runs: list[Run], out_dir: Path) -> list[str]:
    """Strict and Task against the budget for each agent/model and module with at least two budgets."""
    series: dict[tuple, dict[tuple, list[Run]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        if run.has_rounds:
            series[(row_key(run), run.module)][budget_of(run)].append(run)
    series = {key: value for key, value in series.items() if len(value) >= 2}
    if not series:
        return []
    pyplot = _pyplot()
    figure, axes = pyplot.subplots(1, 2, figsize=(11, 4), sharey=True)
    for axis, metric in zip(axes, ("task", "strict")):
        for (key, module), by_budget in sorted(series.items(), key=lambda item: str(item[0])):
            budgets = sorted(by_budget)
            cells = [cell_estimate(by_budget[budget], metric, f"budget|{key}|{module}|{budget}|{metric}")
                     for budget in budgets]
            values = [np.nan if cell.value is None else cell.value for cell in cells]
            lows = [0.0 if cell.low is None else cell.value - cell.low for cell in cells]
            highs = [0.0 if cell.high is None else cell.high - cell.value for cell in cells]
            label = f"{row_label(by_budget[budgets[0]][0])} · {get(module).title}"
            axis.errorbar(range(len(budgets)), values, yerr=[lows, highs], marker="o", capsize=3, label=label)
            axis.set_xticks(range(len(budgets)), [budget_label(budget) for budget in budgets])
        axis.set_title({"task": "Task", "strict": "Strict"}[metric])
        axis.set_xlabel("budget (tool calls, else tool-calling rounds)")
        axis.set_ylim(-0.02, 1.05)
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("score (mean over cases, 95% CI)")
    axes[-1].legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    figure.suptitle("Score against the operation budget")
    return _save(figure, out_dir, "budget")


def write_plots(runs: list[Run], out_dir: Path) -> list[str]:
    """Write every applicable figure; returns the file names (relative to ``out_dir``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for plot in (scores_plot, task_vs_strict_plot, process_plot, budget_plot, milestone_plots):
        written += plot(runs, out_dir)
    return written

"""A milestone figure per repeated case (MedFlow-Bench's Figure 7): runs as rows, workflow milestones as columns."""

from __future__ import annotations

from pathlib import Path

from .canvas import pyplot, save
from .runs import Run
from .tables.stability import repeated_cases

REACHED, MISSED, COMPLETE, INCOMPLETE = "#4caf50", "#e0e0e0", "#2e7d32", "#c62828"


def milestone_plots(runs: list[Run], out_dir: Path) -> list[str]:
    """One figure per repeated case whose workflow was judged: runs as rows, milestones as columns."""
    written = []
    for run in sorted(runs, key=lambda run: run.name):
        for case, episodes in repeated_cases(run).items():
            progress = [(episode.result.get("repeat"), {**item, "status": _status(episode.audit, item)})
                        for episode in episodes
                        for item in [(episode.audit or {}).get("milestones")] if isinstance(item, dict)]
            if not progress:
                continue
            written += _milestone_figure(pyplot(), save, run, case, progress, out_dir)
    return written


def _status(audit: dict, progress: dict) -> str:
    """A run's status word: complete, or why not (MedFlow-Bench's red cells: missing, incomplete, unregistered)."""
    if progress.get("complete"):
        return "complete"
    if any(finding.get("rule") == "F3.fusion_unregistered" for finding in audit.get("findings", [])):
        return "unregistered fusion"
    return "incomplete" if progress.get("begun") else "not begun"


def _milestone_figure(pyplot, save, run: Run, case: str, progress: list, out_dir: Path) -> list[str]:
    names = list(progress[0][1]["reached"])
    figure, axes = pyplot.subplots(figsize=(1.3 * (len(names) + 1) + 1.5, 0.45 * len(progress) + 1.4))
    for row, (_, item) in enumerate(progress):
        for column, name in enumerate(names):
            seq = item["reached"].get(name)
            axes.add_patch(pyplot.Rectangle((column, row), 0.92, 0.8, color=REACHED if seq is not None else MISSED))
            axes.text(column + 0.46, row + 0.4, "—" if seq is None else f"#{seq}", ha="center", va="center",
                      fontsize=8)
        status = COMPLETE if item["complete"] else INCOMPLETE
        axes.add_patch(pyplot.Rectangle((len(names), row), 0.92, 0.8, color=status))
        axes.text(len(names) + 0.46, row + 0.4, item["status"], ha="center", va="center", fontsize=8,
                  color="white")
    axes.set_xlim(0, len(names) + 1)
    axes.set_ylim(len(progress), 0)
    axes.set_xticks([index + 0.46 for index in range(len(names) + 1)], [*names, "status"])
    axes.set_yticks([row + 0.4 for row in range(len(progress))], [f"run {repeat}" for repeat, _ in progress])
    axes.tick_params(length=0)
    for spine in axes.spines.values():
        spine.set_visible(False)
    complete = sum(item["complete"] for _, item in progress)
    axes.set_title(f"{case} · {run.name}: {complete} of {len(progress)} runs complete the "
                   f"{progress[0][1]['workflow']} milestones (cell: record number)", fontsize=9)
    safe = "".join(character if character.isalnum() or character in "-_" else "_" for character in
                   f"milestones_{run.name}_{case}")[:120]
    return save(figure, out_dir, safe)

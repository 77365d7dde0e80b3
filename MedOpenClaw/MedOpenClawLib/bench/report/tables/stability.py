"""Stability across repeats: for each case run more than once, how far its repeated runs agree (the spread that
the case-level means average away, shown apart)."""

from __future__ import annotations

from collections import defaultdict

from ....trace_audit import stability
from ..runs import Episode, Run
from .grouping import identity_header, identity_of, sectioned
from .layout import IDENTITY_HEADER, PRIVILEGED_NOTE, Cell, Column, Row, Table

STABILITY_COLUMNS = [
    Column("runs", "Repeats", "runs", kind="count"),
    Column("task_sd", "Scores across repeats", "Task SD", kind="count"),
    Column("strict_sd", "Scores across repeats", "Strict SD", kind="count"),
    Column("complete_share", "Repeats", "workflow complete", kind="count"),
    Column("final_view_agreement", "Final views", "agreement", kind="count"),
    Column("final_image_difference", "Final views", "pixel difference", kind="count"),
    Column("runs_without_mask", "Final masks", "no mask", kind="count"),
    Column("mask_bbox_iou", "Final masks", "box IoU", kind="count"),
    Column("mask_volume_cv", "Final masks", "volume CV", kind="count"),
]


def repeated_cases(run: Run) -> dict[str, list[Episode]]:
    """case id -> its counted episodes, for cases run more than once."""
    cases: dict[str, list[Episode]] = defaultdict(list)
    for episode in run.scored:
        cases[episode.case_id].append(episode)
    return {case: episodes for case, episodes in sorted(cases.items()) if len(episodes) > 1}


def _runs_of(episodes: list[Episode]) -> list[dict]:
    return [{"repeat": episode.result.get("repeat"), "trace_dir": str(episode.trace.parent) if episode.trace else None,
             **(episode.audit or {})} for episode in episodes]


def _sd(episodes: list[Episode], metric: str) -> float | None:
    values = [episode.metrics[metric] for episode in episodes if episode.metrics.get(metric) is not None]
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return round((sum((value - mean) ** 2 for value in values) / (len(values) - 1)) ** 0.5, 4)


def build(runs: list[Run]) -> Table:
    rows = []
    for run in sorted(runs, key=lambda run: run.name):
        for case, episodes in repeated_cases(run).items():
            result = {**stability(_runs_of(episodes)), "task_sd": _sd(episodes, "task"),
                      "strict_sd": _sd(episodes, "strict")}
            cells = {column.id: Cell(plain=result[column.id]) for column in STABILITY_COLUMNS}
            identity = identity_of([run])
            rows.append(Row([f"{run.name} · {case}", *identity_header(identity)], cells, identity))
    caption = ("Cases run more than once (bench run --repeats N; the tables count each once, at its mean): the "
               "standard deviation of Task and Strict across its repeats, the share of runs completing the workflow "
               "milestones, the agreement of the final views (same volumes, offsets within 1 mm) and their mean "
               "pixel difference (0..1), and the final masks' spread (runs without a mask, pairwise bounding-box "
               "IoU, volume coefficient of variation).")
    sections = sectioned(rows, STABILITY_COLUMNS, mean_rows=False) if rows else []
    return Table("stability", "Trace audit: stability across repeats", caption, ("Case", *IDENTITY_HEADER),
                 STABILITY_COLUMNS, sections, [PRIVILEGED_NOTE])

"""The runs table: one row per run directory: identity, outcome counts, scores, process metrics and usage totals."""

from __future__ import annotations

from ..runs import INTEGER_METRICS, Run, denominator
from .grouping import cell_estimate, defines, identity_header, identity_of
from .layout import IDENTITY_HEADER, SCORE_NOTES, Cell, Column, Row, Section, Table

PROCESS_GROUP = "Process (mean per case)"
USAGE_GROUP = "Model usage (run total)"
COUNTS = {"n": "cases", "invalid": "invalid", "errors": "error", "rejected": "rejected"}
RUN_COLUMNS = [
    Column("module", "Run", "Module", kind="text"),
    Column("n", "Run", "n", kind="count"),
    Column("invalid", "Run", "INVALID", kind="count"),
    Column("errors", "Run", "errors", kind="count"),
    Column("rejected", "Run", "rejected (0)", kind="count"),
    Column("task", "Scores", "Task", metric="task"),
    Column("strict", "Scores", "Strict", metric="strict"),
    Column("loc", "Scores", "Loc.", metric="loc"),
    Column("calls", PROCESS_GROUP, "tool calls", metric="calls", kind="mean"),
    Column("images", PROCESS_GROUP, "images", metric="images", kind="mean"),
    Column("planning_f1", PROCESS_GROUP, "planning F1", metric="planning_f1", kind="mean"),
    Column("execution", PROCESS_GROUP, "execution", metric="execution", kind="mean"),
    Column("progress_rate", PROCESS_GROUP, "progress", metric="progress_rate", kind="mean"),
    Column("budget_exhausted", PROCESS_GROUP, "budget exhausted", metric="budget_exhausted", kind="mean"),
    Column("input_tokens", USAGE_GROUP, "input tokens", metric="input_tokens", kind="count"),
    Column("output_tokens", USAGE_GROUP, "output tokens", metric="output_tokens", kind="count"),
    Column("reasoning_tokens", USAGE_GROUP, "reasoning tokens", metric="reasoning_tokens", kind="count"),
    Column("model_seconds", USAGE_GROUP, "model s", metric="model_seconds", kind="count"),
    Column("cost_usd", USAGE_GROUP, "cost USD", metric="cost_usd", kind="count"),
]


def count_cell(run: Run, column: Column) -> Cell:
    if column.id == "n":
        return Cell(plain=len({episode.case_id for episode in run.scored}))
    if column.id in COUNTS:
        return Cell(plain=run.count(COUNTS[column.id]))
    values = run.values(column.metric, every_episode=True)
    total = sum(values) if values else None
    integer = column.metric in INTEGER_METRICS
    return Cell(plain=None if total is None else (int(round(total)) if integer else round(total, 4)))


def build(runs: list[Run]) -> Table:
    rows = []
    for run in sorted(runs, key=lambda run: (run.module, run.name)):
        cells = {}
        for column in RUN_COLUMNS:
            if column.id == "module":
                cells[column.id] = Cell(plain=run.module)
            elif column.kind == "count":
                cells[column.id] = count_cell(run, column)
            elif not defines(run.module, column.metric):
                cells[column.id] = Cell()
            else:
                cells[column.id] = Cell(cell_estimate([run], column.metric, f"{run.name}|{column.id}"),
                                        denominator=denominator([run]))
        identity = identity_of([run])
        rows.append(Row([run.name, *identity_header(identity)], cells, identity))
    recorded = [column for column in RUN_COLUMNS if column.group != USAGE_GROUP
                or any(row.cells[column.id].plain not in (None, 0) for row in rows)]
    return Table("runs", "Runs", "Every run directory of the report. n: cases; rejected: episodes a server refused "
                 "for good, scored 0 within n. Scores and process metrics: mean over cases [95% CI]; model usage: "
                 "totals over every episode, errored and INVALID ones included (left out where no run recorded any, "
                 "e.g. offline agents, or cost without a price table).",
                 ("Run", *IDENTITY_HEADER), recorded, [Section("Runs", rows)], list(SCORE_NOTES))

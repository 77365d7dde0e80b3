"""Table 7: the operation-budget study: for each backbone whose runs differ only in budget, one row per budget
(tool calls, ``--max-tool-calls``, beside rounds, ``--max-rounds``)."""

from __future__ import annotations

from collections import defaultdict

from ...modules import RADIOLOGY, of_application
from ..runs import Run
from .grouping import budget_of, cell_for, identity_header, identity_of, key_text, row_key
from .layout import IDENTITY_HEADER, SCORE_NOTES, Row, Section, Table
from .table5 import columns as table5_columns


def build(runs: list[Run]) -> Table:
    columns = table5_columns()
    by_key: dict[tuple, list[Run]] = defaultdict(list)
    for run in runs:
        if run.track == "A" and run.module in of_application(RADIOLOGY):
            by_key[row_key(run)].append(run)
    rows = []
    for key, key_runs in by_key.items():
        budgets = sorted({budget_of(run) for run in key_runs})
        if len(budgets) < 2:
            continue
        for budget in budgets:
            at_budget = [run for run in key_runs if budget_of(run) == budget]
            by_module = defaultdict(list)
            for run in at_budget:
                by_module[run.module].append(run)
            cells = {column.id: cell_for(by_module.get(column.module), column, f"{key_text(key)}|{budget}")
                     for column in columns}
            identity = identity_of(at_budget)
            rows.append(Row(identity_header(identity), cells, {**identity, "budget_key": list(budget)}))
    rows.sort(key=lambda row: (row.header[:4], row.identity["budget_key"]))
    for row in rows:  # JSON: an unlimited tool-call budget is null
        row.identity["budget_key"] = [None if part == float("inf") else part for part in row.identity["budget_key"]]
    return Table("table7", "Table 7: Operation-budget study",
                 "Runs of the same agent/model that differ only in their budget: tool calls (`bench run "
                 "--max-tool-calls N`, the operations the agent may make) beside tool-calling rounds "
                 "(`--max-rounds`); each row is the budget that bounded its runs.",
                 IDENTITY_HEADER, columns, [Section("Operation budget", rows)] if rows else [], list(SCORE_NOTES))

"""Table 5: Table 1 expanded with each module's sub-columns (its spec's ``sub_metrics``: evidence fields,
subtasks)."""

from __future__ import annotations

from ...modules import in_table
from ..runs import Run
from .grouping import detail_columns, track_a_table
from .layout import Column, Table


def columns() -> list[Column]:
    return [column for module in in_table("table5") for column in detail_columns(module)]


def build(runs: list[Run]) -> Table:
    return track_a_table(
        runs, "table5", "Table 5: Detailed viewer-native radiology metrics",
        "Table 1 expanded with each module's sub-columns: lesion-state evidence fields (NML = non-measurable "
        "lesion) and subtasks. Rows are grouped by model family. Cells: mean [95% CI] over cases.",
        columns(), in_table("table5"),
    )

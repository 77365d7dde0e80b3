"""Table 2: viewer-native pathology (breast and lymph-node WSI): Task/Strict/Loc."""

from __future__ import annotations

from ...modules import in_table
from ..runs import Run
from .grouping import score_columns, track_a_table
from .layout import Table


def build(runs: list[Run]) -> Table:
    return track_a_table(
        runs, "table2", "Table 2: Viewer-native pathology",
        "Coordinate-grounded WSI scoring. Strict = answer plus evidence; Loc. = coordinate localization on "
        "positive slides. Rows are grouped by model family. Cells: mean [95% CI] over cases.",
        [column for module in in_table("table2") for column in score_columns(module)], in_table("table2"),
    )

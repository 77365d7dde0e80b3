"""Table 1: viewer-native radiology (Track A): Task/Strict per module, Loc. where defined, Model Avg."""

from __future__ import annotations

from ...modules import in_table
from ..runs import Run
from .grouping import score_columns, track_a_table
from .layout import METRIC_LABELS, Column, Table


def columns() -> list[Column]:
    averages = [Column(f"avg:{metric}", "Model Avg.", METRIC_LABELS[metric], None, metric)
                for metric in ("task", "strict", "loc")]
    return [column for module in in_table("table1") for column in score_columns(module)] + averages


def build(runs: list[Run]) -> Table:
    return track_a_table(
        runs, "table1", "Table 1: Viewer-native radiology",
        "Track A (viewer-native). Strict = answer plus evidence; Loc. where defined. Model Avg.: Task and "
        "Strict average the three task families, Loc. averages Brain MRI and Lung PET/CT (shown only when "
        "every part is present; its interval resamples each family's cases on their own). Rows are grouped by "
        "model family. Cells: mean [95% CI] over cases.",
        columns(), in_table("table1"),
    )

"""The trace audit as a table: how often each failure mode occurs per model and module (MedFlow-Bench's Section 6
as numbers). Rates are case-level means with intervals, like every other cell (values from :mod:`..audits`)."""

from __future__ import annotations

from ...modules import title
from ..audits import FINDING_METRICS
from ..runs import Run
from .grouping import cell_estimate, identity_header, identity_of, main_runs, sectioned
from .layout import IDENTITY_HEADER, SCORE_NOTES, Cell, Column, Row, Table

FINDINGS_GROUP = "Cases with a finding (share)"
FINDINGS_COLUMNS = [
    Column("module", "Run", "Module", kind="text"),
    Column("audited", "Run", "n", kind="count"),
    Column("finding:any", FINDINGS_GROUP, "any", metric="finding:any"),
    *[Column(metric, FINDINGS_GROUP, metric.split(":")[1], metric=metric) for metric in FINDING_METRICS],
    Column("ungrounded_share", "Evidence", "ungrounded fields", metric="ungrounded_share"),
    Column("milestones_complete", "Evidence", "workflow complete", metric="milestones_complete"),
]


def build(runs: list[Run]) -> Table:
    """One row per agent/model/track and module."""
    rows = []
    for key, by_module in main_runs(runs).items():
        for module, module_runs in sorted(by_module.items()):
            audited = {episode.case_id for run in module_runs for episode in run.scored
                       if "finding:any" in episode.metrics}
            if not audited:
                continue
            name = "|".join(map(str, key)) + f"|{module}"
            cells = {"module": Cell(plain=title(module)), "audited": Cell(plain=len(audited))}
            for column in FINDINGS_COLUMNS[2:]:
                cells[column.id] = Cell(cell_estimate(module_runs, column.metric, f"{name}|{column.id}"))
            identity = identity_of(module_runs)
            rows.append(Row(identity_header(identity), cells, identity))
    caption = ("Trace audit (docs/trace-audit.md): share of cases with at least one finding of each code "
               "-- EV ungrounded spatial evidence, F1 registration objective drift, F2 pseudo-quantification, F3 "
               "transform-layer misbinding, F4 self-confirming segmentation, G5 incomplete advanced-operation "
               "workflow -- the share of evidence fields nothing in the trace grounds, and the share of judged "
               "cases completing their workflow milestones (repeats averaged per case). Cells: mean [95% CI].")
    return Table("findings", "Trace audit: failure modes per model and module", caption, IDENTITY_HEADER,
                 FINDINGS_COLUMNS, sectioned(rows, FINDINGS_COLUMNS, mean_rows=False), list(SCORE_NOTES))

"""MedFlow-Bench's table layouts built from any set of runs (models x modules x tracks x budgets).

- Table 1: radiology, viewer-native (Track A): Task/Strict per module, Loc. where defined, Model Avg.
- Table 2: pathology (BRACS = breast WSI, CAMELYON17 = lymph-node WSI): Task/Strict/Loc.
- Table 3: Track B, one column per (operation, module) as published (runs with `--operators`), against Track A
  of the same backbone (Registration on LUMIERE: against the unregistered native-scan control), one row per
  backbone and metric.
- Table 5: Table 1 expanded with the LUMIERE lesion-state fields and the NSCLC subtasks.
- Table 6: Track C (2-D slice montage) against Track A of the same backbone.
- Table 7: the max-rounds budget study, for backbones whose runs differ only in budget.

A row is one agent/model/provider on one track; several run directories of the same row and module are pooled.
When a row has runs at several budgets, the main tables use the largest (MedFlow-Bench's main setting is 20 rounds)
and the budget table shows each. Privileged runs (the oracle reads the hidden ground truth) form their own
section. Cells without runs stay empty (rendered as an em dash); every cell keeps its n and bootstrap interval.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ..modules import PATHOLOGY, RADIOLOGY, get, names, of_application
from .runs import INTEGER_METRICS, Run
from .stats import MISSING, Estimate, average, difference, estimate

METRIC_LABELS = {"task": "Task", "strict": "Strict", "loc": "Loc."}
IDENTITY_HEADER = ("Model", "Provider", "Agent", "Track", "Rounds")
PRIVILEGED_NOTE = "† privileged: the reference agent reads the hidden ground truth (a check of the tools and scorers)."


@dataclass(frozen=True)
class Column:
    id: str
    group: str
    label: str
    module: str | None = None
    metric: str | None = None
    kind: str = "score"  # score | sub (fine-grained field or subtask) | mean (no interval in text) | count | text


@dataclass
class Cell:
    estimate: Estimate = MISSING
    delta: Estimate | None = None  # change against the reference cell (Tables 3 and 6)
    reference: Estimate | None = None
    plain: float | str | None = None  # a count or total without an interval (the runs table)


@dataclass
class Row:
    header: list[str]
    cells: dict[str, Cell]
    identity: dict
    summary_row: bool = False


@dataclass
class Section:
    title: str
    rows: list[Row] = field(default_factory=list)


@dataclass
class Table:
    id: str
    title: str
    caption: str
    row_header: tuple[str, ...]
    columns: list[Column]
    sections: list[Section]
    notes: list[str] = field(default_factory=list)

    def __post_init__(self):
        privileged = any(row.identity.get("privileged") for section in self.sections for row in section.rows)
        if not privileged:
            self.notes = [note for note in self.notes if note != PRIVILEGED_NOTE]

    @property
    def empty(self) -> bool:
        return not any(row.cells for section in self.sections for row in section.rows)


# ------------------------------------------------------------------------------------------------ columns
def defines(module: str, metric: str) -> bool:
    """Whether ``module`` has a ``metric`` column (Loc only where the module spec has a localization rule); a run
    of a module no spec knows keeps every column."""
    return metric != "loc" or module not in names() or get(module).has_loc


def score_columns(module: str, metrics: tuple[str, ...] = ("task", "strict", "loc")) -> list[Column]:
    spec = get(module)
    return [Column(f"{module}:{metric}", spec.title, METRIC_LABELS[metric], module, metric)
            for metric in metrics if metric in spec.metrics]


def detail_columns(module: str) -> list[Column]:
    """Table 5's columns of one module: its score metrics and sub-metrics in the order its spec gives."""
    spec = get(module)
    labels = {metric.key: metric.label for metric in spec.sub_metrics}
    return [Column(f"{module}:{key}", spec.title, labels[key], module, key, "sub") if key in labels
            else score_columns(module, (key,))[0] for key in spec.detail_columns]


def table1_columns() -> list[Column]:
    columns = [column for module in of_application(RADIOLOGY) for column in score_columns(module)]
    return columns + [Column(f"avg:{metric}", "Model Avg.", METRIC_LABELS[metric], None, metric)
                      for metric in ("task", "strict", "loc")]


def table5_columns() -> list[Column]:
    return [column for module in of_application(RADIOLOGY) for column in detail_columns(module)]


# ------------------------------------------------------------------------------------------------ grouping
def row_key(run: Run, images: bool = True) -> tuple:
    # the conversation policy: never pooled across; nor the paper's tool set with more tools
    policy = tuple(value for value in (run.image_history, run.tool_history) if value)
    policy += (f"{run.toolset} tools",) if run.toolset not in (None, "paper") else ()
    # the unregistered LUMIERE control (native scans) is a row of its own, never pooled with atlas-space runs
    space = ("native scans",) if images and run.images == "native" else ()
    return (run.agent, run.model, run.provider, run.track, *policy, *space)


def pooling_warnings(runs: list[Run]) -> list[str]:
    """One warning per table row and module whose runs scored different case packages: the tables pool them
    into one cell, which is only meaningful when they are the same cases."""
    groups: dict[tuple, list[Run]] = defaultdict(list)
    for run in runs:
        groups[(*row_key(run), run.module, run.operation)].append(run)
    warnings = []
    for members in groups.values():
        packages = {run.package for run in members}
        if len(packages) > 1:
            first = members[0]
            names = ", ".join(f"{run.name} ({run.package})" for run in members)
            warnings.append(f"{first.model or first.agent} on track {first.track}, {first.module}: pooling runs "
                            f"of {len(packages)} different case packages: {names}")
    return warnings


def identity_of(runs: list[Run], rounds: list[int | None] | None = None) -> dict:
    first = runs[0]
    rounds = sorted({run.max_rounds for run in runs if run.max_rounds is not None}) if rounds is None else rounds
    track = first.track + (" (native scans)" if first.images == "native" else "")
    return {"model": first.model, "provider": first.provider, "agent": first.agent, "track": track,
            "max_rounds": rounds, "privileged": any(run.privileged for run in runs),
            "runs": sorted({run.name for run in runs})}


def identity_header(identity: dict) -> list[str]:
    agent = identity["agent"] + (" †" if identity["privileged"] else "")
    rounds = "/".join(str(value) for value in identity["max_rounds"]) or "—"
    return [identity["model"] or "—", identity["provider"] or "—", agent, identity["track"], rounds]


def pooled(runs: list[Run], metric: str, key: str) -> Estimate:
    values = [value for run in runs for value in run.values(metric)]
    return estimate(values, key)


def main_runs(runs: list[Run], key=row_key) -> dict[tuple, dict[str, list[Run]]]:
    """row key -> module -> the runs at the largest budget of that row and module."""
    grouped: dict[tuple, dict[str, list[Run]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        grouped[key(run)][run.module].append(run)
    for modules in grouped.values():
        for module, module_runs in modules.items():
            top = max((run.max_rounds or 0) for run in module_runs)
            modules[module] = [run for run in module_runs if (run.max_rounds or 0) == top]
    return grouped


def cell_for(module_runs: list[Run] | None, column: Column, key: str) -> Cell:
    if not module_runs or column.metric is None:
        return Cell()
    if not defines(column.module, column.metric):
        return Cell()
    return Cell(pooled(module_runs, column.metric, f"{key}|{column.id}"))


def _key_text(key: tuple) -> str:
    return "|".join(str(part) for part in key)


def score_rows(grouped: dict[tuple, dict[str, list[Run]]], columns: list[Column],
               modules: tuple[str, ...]) -> list[Row]:
    rows = []
    for key, by_module in grouped.items():
        present = {module: runs for module, runs in by_module.items() if module in modules}
        if not present:
            continue
        cells = {column.id: cell_for(present.get(column.module), column, _key_text(key))
                 for column in columns if column.module is not None}
        for column in columns:
            if column.module is None:  # Model Avg.: unweighted over the task families that define the metric
                parts = [cells[other.id].estimate for other in columns
                         if other.module is not None and other.metric == column.metric and other.kind == "score"]
                cells[column.id] = Cell(average(parts))
        all_runs = [run for runs in present.values() for run in runs]
        identity = identity_of(all_runs)
        rows.append(Row(identity_header(identity), cells, identity))
    return rows


def sectioned(rows: list[Row], columns: list[Column], mean_rows: bool = True) -> list[Section]:
    """Agents first, the privileged reference apart; each section ends with its mean over reported rows."""
    sections = []
    for title, privileged in (("Agents", False), ("Privileged reference †", True)):
        members = sorted((row for row in rows if row.identity["privileged"] == privileged), key=lambda row: row.header)
        if not members:
            continue
        section = Section(title, members)
        if mean_rows and len(members) > 1:
            cells = {}
            for column in columns:
                parts = [row.cells[column.id].estimate for row in members
                         if column.id in row.cells and row.cells[column.id].estimate.value is not None]
                cells[column.id] = Cell(average(parts)) if parts else Cell()
            section.rows.append(Row(["Mean over reported", "", "", "", ""], cells, {"summary": True}, True))
        sections.append(section)
    return sections


# ------------------------------------------------------------------------------------------------ tables
def track_a_table(runs: list[Run], table_id: str, title: str, caption: str, columns: list,
                  modules: tuple) -> Table:
    """A per-backbone score table over the Track A runs (Tables 1, 2 and 5 differ only in columns and text)."""
    rows = score_rows(main_runs([run for run in runs if run.track == "A"]), columns, modules)
    return Table(table_id, title, caption, IDENTITY_HEADER, columns, sectioned(rows, columns), [PRIVILEGED_NOTE])


def table1(runs: list[Run]) -> Table:
    return track_a_table(
        runs, "table1", "Table 1: Viewer-native radiology",
        "Track A (viewer-native). Strict = answer plus evidence; Loc. where defined. Model Avg.: Task and "
        "Strict average the three task families, Loc. averages Brain MRI and Lung PET/CT (shown only when "
        "every part is present). Cells: mean [bootstrap 95% CI]; n = scored episodes.",
        table1_columns(), of_application(RADIOLOGY),
    )


def table2(runs: list[Run]) -> Table:
    return track_a_table(
        runs, "table2", "Table 2: Viewer-native pathology",
        "Coordinate-grounded WSI scoring. Strict = answer plus evidence; Loc. = coordinate localization on "
        "positive slides. Cells: mean [bootstrap 95% CI].",
        [column for module in of_application(PATHOLOGY) for column in score_columns(module)],
        of_application(PATHOLOGY),
    )


def table5(runs: list[Run]) -> Table:
    return track_a_table(
        runs, "table5", "Table 5: Detailed viewer-native radiology metrics",
        "Table 1 expanded with the LUMIERE lesion-state evidence fields (NML = non-measurable lesion) and "
        "the NSCLC subtasks. Cells: mean [bootstrap 95% CI].",
        table5_columns(), of_application(RADIOLOGY),
    )


def _reference_runs(runs: list[Run]) -> dict[tuple, dict[str, list[Run]]]:
    """backbone -> module -> Track A runs (largest budget), the controls of Tables 3 and 6."""
    controls: dict[tuple, dict[str, list[Run]]] = defaultdict(dict)
    for by_module in main_runs([run for run in runs if run.track == "A"]).values():
        for module, module_runs in by_module.items():
            controls[module_runs[0].backbone].setdefault(module, module_runs)
    return controls


def _delta_cell(new_runs: list[Run] | None, reference_runs: list[Run] | None, module: str, metric: str,
                key: str) -> Cell:
    if not new_runs or not defines(module, metric):
        return Cell()
    new = pooled(new_runs, metric, f"{key}|new|{module}:{metric}")
    if not reference_runs:
        return Cell(new)
    reference = pooled(reference_runs, metric, f"{key}|ref|{module}:{metric}")
    return Cell(new, difference(new, reference), reference)


def _track_rows(runs: list[Run], track: str):
    """(key text, module -> runs, module -> Track A control runs, identity) per row of a delta table."""
    controls = _reference_runs(runs)
    for key, by_module in main_runs([run for run in runs if run.track == track]).items():
        present = {module: value for module, value in by_module.items() if module in of_application(RADIOLOGY)}
        if present:
            backbone = next(iter(present.values()))[0].backbone
            yield (_key_text(key), present, controls.get(backbone, {}),
                   identity_of([run for value in present.values() for run in value]))


def operators_text(runs: list[Run]) -> str:
    """Which operators the agent actually ran: the share of scored episodes that called each successfully."""
    episodes = [episode for run in runs for episode in run.scored]
    counts = Counter(name for episode in episodes for name in episode.operators)
    return ", ".join(f"{name} {count}/{len(episodes)}" for name, count in sorted(counts.items())) or "none"


# MedFlow-Bench Table 3 columns: (operation, module); Registration on LUMIERE is compared with the
# unregistered control (a Track A run on native, not co-registered, LUMIERE scans: `bench prepare --images native`)
TABLE3_CELLS = (("segmentation", "lumiere"), ("segmentation", "ucsf-pdgm"), ("segmentation", "nsclc"),
                ("registration", "lumiere"), ("vista3d", "nsclc"))
OPERATION_TITLES = {"segmentation": "Segmentation", "registration": "Registration", "vista3d": "3D VISTA (MONAI)",
                    "all": "All operators", "custom": "Other operator sets"}


def _table3_controls(runs: list[Run]) -> dict[tuple, list[Run]]:
    """(backbone, module, image space) -> the Track A runs (largest budget) a Track B cell is compared with."""
    controls: dict[tuple, list[Run]] = defaultdict(list)
    for by_module in main_runs([run for run in runs if run.track == "A"]).values():
        for module, module_runs in by_module.items():
            for run in module_runs:
                controls[(run.backbone, module, run.images)].append(run)
    return controls


def table3(runs: list[Run]) -> Table:
    """MedFlow-Bench's Table 3: one column per (operation, module), each a Track B run with only that operation's
    operators (`bench run --track B --operators ...`) against Track A of the same backbone -- Registration on
    LUMIERE against the unregistered LUMIERE control. Runs with every operator, or another set, get columns of
    their own after those."""
    track_b = [run for run in runs if run.track == "B" and run.module in of_application(RADIOLOGY)]
    extra = sorted({(run.operation, run.module) for run in track_b} - set(TABLE3_CELLS),
                   key=lambda cell: (cell[0], of_application(RADIOLOGY).index(cell[1])))
    cells_of_table = [*TABLE3_CELLS, *extra]
    columns = [Column(f"{operation}:{module}", OPERATION_TITLES[operation], get(module).title, module)
               for operation, module in cells_of_table]
    controls = _table3_controls(runs)
    rows = []
    for key, by_module in main_runs(track_b, lambda run: row_key(run, images=False)).items():
        present = [run for module_runs in by_module.values() for run in module_runs]
        backbone, identity = present[0].backbone, identity_of(present)
        used = operators_text(present)
        for metric in ("task", "strict", "loc"):
            cells = {}
            for operation, module in cells_of_table:
                members = [run for run in by_module.get(module, []) if run.operation == operation]
                space = "native" if (operation, module) == ("registration", "lumiere") else "atlas"
                cells[f"{operation}:{module}"] = _delta_cell(members, controls.get((backbone, module, space)),
                                                             module, metric, f"{_key_text(key)}|{operation}")
            rows.append(Row([*identity_header(identity), used, METRIC_LABELS[metric]], cells,
                            {**identity, "metric": metric, "operators_called": used}))
    sections = [Section(title, [row for row in rows if row.identity["privileged"] == privileged])
                for title, privileged in (("Agents", False), ("Privileged reference †", True))]
    return Table("table3", "Table 3: Track B, advanced operations",
                 "Each cell: the score after enabling the column's operation (`bench run --track B --operators "
                 "segmentation|registration|vista3d`) and its change against the Track A (viewer-native) score of "
                 "the same backbone, except Registration on Longitudinal MRI, compared with the unregistered "
                 "LUMIERE control (Track A on native scans, `bench prepare --images native`); ↑ improvement, "
                 "↓ degradation, ↔ no change. 'Operators called': share of scored episodes that ran each operator.",
                 (*IDENTITY_HEADER, "Operators called", "Metric"), columns,
                 [section for section in sections if section.rows],
                 [PRIVILEGED_NOTE])


def table6(runs: list[Run]) -> Table:
    columns = [column for module in of_application(RADIOLOGY) for column in score_columns(module)]
    rows = []
    for key, present, control, identity in _track_rows(runs, "C"):
        cells = {column.id: _delta_cell(present.get(column.module), control.get(column.module), column.module,
                                        column.metric, key) for column in columns}
        rows.append(Row(identity_header(identity), cells, identity))
    matched = [row for row in rows if any(cell.delta is not None for cell in row.cells.values())]
    alone = [row for row in rows if row not in matched]
    sections = [Section(title, members) for title, members in
                (("2D slice montage, with a matched viewer-native run", matched), ("Alt. only", alone)) if members]
    return Table("table6", "Table 6: Runtime-agnostic track (Track C)",
                 "Each cell: the Track C (2-D slice montage, one turn) score and its change against the matched "
                 "Track A run of the same backbone; Alt.-only rows have no matched viewer-native run.",
                 IDENTITY_HEADER, columns, sections, [])


def budget_table(runs: list[Run]) -> Table:
    columns = table5_columns()
    by_key: dict[tuple, list[Run]] = defaultdict(list)
    for run in runs:
        if run.track == "A" and run.module in of_application(RADIOLOGY):
            by_key[row_key(run)].append(run)
    rows = []
    for key, key_runs in by_key.items():
        budgets = sorted({run.max_rounds for run in key_runs if run.max_rounds is not None})
        if len(budgets) < 2:
            continue
        for budget in budgets:
            at_budget = [run for run in key_runs if run.max_rounds == budget]
            by_module = defaultdict(list)
            for run in at_budget:
                by_module[run.module].append(run)
            cells = {column.id: cell_for(by_module.get(column.module), column, f"{_key_text(key)}|{budget}")
                     for column in columns}
            identity = identity_of(at_budget, [budget])
            rows.append(Row(identity_header(identity), cells, identity))
    sections = [Section("Operation budget", sorted(rows, key=lambda row: (row.header[:4], int(row.header[4]))))]
    return Table("table7", "Table 7: Operation-budget study",
                 "Runs of the same agent/model that differ only in the maximum number of tool rounds.",
                 IDENTITY_HEADER, columns, sections if rows else [], [])


PROCESS_GROUP = "Process (mean per episode)"
USAGE_GROUP = "Model usage (run total)"
RUN_COLUMNS = [
    Column("module", "Run", "Module", kind="text"),
    Column("n", "Run", "n", kind="count"),
    Column("invalid", "Run", "INVALID", kind="count"),
    Column("errors", "Run", "errors", kind="count"),
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


def runs_table(runs: list[Run]) -> Table:
    """One row per run directory: identity, outcome counts, scores, process metrics and usage totals."""
    rows = []
    for run in sorted(runs, key=lambda run: (run.module, run.name)):
        cells = {}
        for column in RUN_COLUMNS:
            if column.id == "module":
                cells[column.id] = Cell(plain=run.module)
            elif column.id in ("n", "invalid", "errors"):
                outcome = {"n": "scored", "invalid": "invalid", "errors": "error"}[column.id]
                cells[column.id] = Cell(plain=run.count(outcome))
            elif column.kind == "count":
                values = run.values(column.metric, every_episode=True)
                total = sum(values) if values else None
                integer = column.metric in INTEGER_METRICS
                cells[column.id] = Cell(plain=None if total is None else (int(round(total)) if integer
                                                                           else round(total, 4)))
            elif not defines(run.module, column.metric):
                cells[column.id] = Cell()
            else:
                cells[column.id] = Cell(estimate(run.values(column.metric), f"{run.name}|{column.id}"))
        identity = identity_of([run])
        rows.append(Row([run.name, *identity_header(identity)], cells, identity))
    recorded = [column for column in RUN_COLUMNS if column.group != USAGE_GROUP
                or any(row.cells[column.id].plain not in (None, 0) for row in rows)]
    return Table("runs", "Runs", "Every run directory of the report. Scores and process metrics: mean over scored "
                 "episodes [bootstrap 95% CI]; model usage: totals over every episode, errored and INVALID ones "
                 "included (left out where no run recorded any, e.g. offline agents, or cost without a price table).",
                 ("Run", *IDENTITY_HEADER), recorded, [Section("Runs", rows)], [PRIVILEGED_NOTE])


def all_tables(runs: list[Run]) -> list[Table]:
    """Every table that has at least one row (a report over Track A runs has no Table 3/6)."""
    from .findings import findings_table, stability_table

    tables = [runs_table(runs), table1(runs), table2(runs), table3(runs), table5(runs), table6(runs),
              budget_table(runs), findings_table(runs), stability_table(runs)]
    return [table for table in tables if not table.empty]

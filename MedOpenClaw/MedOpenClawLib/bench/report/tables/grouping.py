"""How runs become rows and cells, for every table: row keys, budgets, identities, sections by model family, and
the cells (a case-level estimate with its denominator, or a paired change against a reference cell).

A row is one agent/model/provider on one track under one set of score-changing conditions (conversation policy,
tool set, the native image space of a registration control); several run directories of the same row and module
are pooled into one cell, where runs over the same package add repeats of its cases, not cases. When a row has
runs at several budgets (tool calls, rounds), the main tables use the largest and Table 7 shows each.
"""

from __future__ import annotations

from collections import defaultdict

from ...model_families import FAMILY_TITLES
from ...modules import PATHOLOGY, RADIOLOGY, get, names, of_application
from ..runs import Run, case_values, denominator
from ..stats import MISSING, Estimate, average, estimate, paired_difference
from .layout import IDENTITY_HEADER, METRIC_LABELS, SCORE_NOTES, Cell, Column, Row, Section, Table

UNBOUNDED_METRICS = frozenset({"calls", "images"})  # counts: no [0, 1] bound for the interval rule
NO_BUDGET = "—"


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


def radiology_score_columns() -> list[Column]:
    return [column for module in of_application(RADIOLOGY) for column in score_columns(module)]


def pathology_score_columns() -> list[Column]:
    return [column for module in of_application(PATHOLOGY) for column in score_columns(module)]


# ------------------------------------------------------------------------------------------------ grouping
def row_key(run: Run, images: bool = True) -> tuple:
    # the conversation policy: never pooled across; nor the paper's tool set with more tools
    policy = tuple(value for value in (run.image_history, run.tool_history) if value)
    policy += (f"{run.toolset} tools",) if run.toolset not in (None, "paper") else ()
    # an unregistered control (native scans) is a row of its own, never pooled with atlas-space runs
    space = ("native scans",) if images and run.images == "native" else ()
    return (run.agent, run.model, run.provider, run.track, *policy, *space)


def budget_of(run: Run) -> tuple[float, int]:
    """The budget that bounded a run, ordered so the largest is last: (tool calls, or unlimited; rounds)."""
    return (float("inf") if run.max_tool_calls is None else run.max_tool_calls, run.max_rounds or 0)


def budget_text(runs: list[Run]) -> str:
    """Rounds and tool calls as a row shows them; none for runs without tool rounds (Track C, scored pipelines)."""
    texts = []
    for run in sorted(runs, key=budget_of):
        if not run.has_rounds:
            continue
        text = f"{run.max_rounds} rounds" + (f", {run.max_tool_calls} calls" if run.max_tool_calls else "")
        if text not in texts:
            texts.append(text)
    return " / ".join(texts) or NO_BUDGET


def pooling_warnings(runs: list[Run]) -> list[str]:
    """One warning per table row and module whose runs scored different case packages: their cases are kept
    apart within the cell, which is only meaningful when that is intended."""
    groups: dict[tuple, list[Run]] = defaultdict(list)
    for run in runs:
        groups[(*row_key(run), run.module, run.operation, budget_of(run))].append(run)
    warnings = []
    for members in groups.values():
        packages = {run.package for run in members}
        if len(packages) > 1:
            first = members[0]
            listed = ", ".join(f"{run.name} ({run.package})" for run in members)
            warnings.append(f"{first.model or first.agent} on track {first.track}, {first.module}: pooling runs "
                            f"of {len(packages)} different case packages: {listed}")
    return warnings


def identity_of(runs: list[Run]) -> dict:
    first = runs[0]
    track = first.track + (" (native scans)" if first.images == "native" else "")
    budgets = sorted({budget_of(run) for run in runs if run.has_rounds})
    return {"model": first.model, "provider": first.provider, "agent": first.agent, "track": track,
            "family": first.model_family, "external": first.external,
            "max_rounds": sorted({run.max_rounds for run in runs if run.has_rounds and run.max_rounds is not None}),
            "max_tool_calls": sorted({int(calls) for calls, _ in budgets if calls != float("inf")}),
            "budget": budget_text(runs), "privileged": any(run.privileged for run in runs),
            "runs": sorted({run.name for run in runs})}


def identity_header(identity: dict) -> list[str]:
    agent = identity["agent"] + (" †" if identity["privileged"] else "")
    return [identity["model"] or "—", identity["provider"] or "—", agent, identity["track"], identity["budget"]]


def main_runs(runs: list[Run], key=row_key) -> dict[tuple, dict[str, list[Run]]]:
    """row key -> module -> the runs at the largest budget of that row and module."""
    grouped: dict[tuple, dict[str, list[Run]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        grouped[key(run)][run.module].append(run)
    for modules in grouped.values():
        for module, module_runs in modules.items():
            top = max(budget_of(run) for run in module_runs)
            modules[module] = [run for run in module_runs if budget_of(run) == top]
    return grouped


def key_text(key: tuple) -> str:
    return "|".join(str(part) for part in key)


# ------------------------------------------------------------------------------------------------ cells
def cell_estimate(runs: list[Run], metric: str, key: str) -> Estimate:
    """The case-level estimate of ``metric`` over the pooled ``runs`` (the one way every cell is computed)."""
    bounds = None if metric in UNBOUNDED_METRICS else (0.0, 1.0)
    return estimate(case_values(runs, metric), key, bounds)


def cell_for(module_runs: list[Run] | None, column: Column, key: str) -> Cell:
    if not module_runs or column.metric is None or not defines(column.module, column.metric):
        return Cell()
    return Cell(cell_estimate(module_runs, column.metric, f"{key}|{column.id}"), denominator=denominator(module_runs))


def delta_cell(new_runs: list[Run] | None, reference_runs: list[Run] | None, module: str, metric: str,
               key: str) -> Cell:
    """A cell of Tables 3 and 6: the new score and its paired change against the reference runs' cell over the
    cases both scored (not differenced when they share none)."""
    if not new_runs or not defines(module, metric):
        return Cell()
    new = cell_estimate(new_runs, metric, f"{key}|new|{module}:{metric}")
    cell = Cell(new, denominator=denominator(new_runs))
    if not reference_runs or new.value is None:
        return cell
    reference = cell_estimate(reference_runs, metric, f"{key}|ref|{module}:{metric}")
    paired = paired_difference(new, reference, f"{key}|delta|{module}:{metric}") if reference.value is not None \
        else None
    cell.reference = reference
    if paired is None:
        cell.unmatched = reference.value is not None
    else:
        cell.delta = paired.difference
    return cell


def score_rows(grouped: dict[tuple, dict[str, list[Run]]], columns: list[Column],
               modules: tuple[str, ...]) -> list[Row]:
    rows = []
    for key, by_module in grouped.items():
        present = {module: runs for module, runs in by_module.items() if module in modules}
        if not present:
            continue
        cells = {column.id: cell_for(present.get(column.module), column, key_text(key))
                 for column in columns if column.module is not None}
        for column in columns:
            if column.module is None:  # Model Avg.: unweighted over the task families that define the metric
                parts = [cells[other.id].estimate for other in columns
                         if other.module is not None and other.metric == column.metric and other.kind == "score"
                         and defines(other.module, column.metric)]
                cells[column.id] = Cell(average(parts, f"{key_text(key)}|{column.id}"))
        all_runs = [run for runs in present.values() for run in runs]
        identity = identity_of(all_runs)
        rows.append(Row(identity_header(identity), cells, identity))
    return rows


EXTERNAL_TITLE = "Externally scored pipelines (bench score)"
OFFLINE_TITLE = "Offline agents"
PRIVILEGED_TITLE = "Privileged reference †"


def section_title(identity: dict) -> str:
    """MedFlow-Bench's row groups: model families; scored pipelines, offline agents and the privileged reference
    apart."""
    if identity["privileged"]:
        return PRIVILEGED_TITLE
    if identity.get("external"):
        return EXTERNAL_TITLE + f" · {FAMILY_TITLES[identity['family']]}"
    if identity["model"] is None:
        return OFFLINE_TITLE
    return FAMILY_TITLES[identity["family"]]


def section_order(title: str) -> int:
    order = [*FAMILY_TITLES.values(), EXTERNAL_TITLE, OFFLINE_TITLE, PRIVILEGED_TITLE]
    return next(index for index, prefix in enumerate(order) if title.startswith(prefix))


def sectioned(rows: list[Row], columns: list[Column], mean_rows: bool = True) -> list[Section]:
    """Rows grouped by model family (then scored pipelines, offline agents, the privileged reference); each
    group of several rows ends with its plain mean over the reported rows (no interval: rows share cases)."""
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        groups[section_title(row.identity)].append(row)
    sections = []
    for title in sorted(groups, key=lambda text: (section_order(text), text)):
        members = sorted(groups[title], key=lambda row: row.header)
        section = Section(title, members)
        if mean_rows and len(members) > 1:
            cells = {}
            for column in columns:
                parts = [row.cells[column.id].estimate.value for row in members
                         if column.id in row.cells and row.cells[column.id].estimate.value is not None]
                cells[column.id] = Cell(Estimate(sum(parts) / len(parts), len(parts))) if parts else Cell(MISSING)
            blank = [""] * (len(members[0].header) - 1)
            section.rows.append(Row(["Mean over reported", *blank], cells, {"summary": True}, True))
        sections.append(section)
    return sections


def track_a_table(runs: list[Run], table_id: str, title: str, caption: str, columns: list,
                  modules: tuple) -> Table:
    """A per-backbone score table over the Track A runs (Tables 1, 2 and 5 differ only in columns and text)."""
    rows = score_rows(main_runs([run for run in runs if run.track == "A"]), columns, modules)
    return Table(table_id, title, caption, IDENTITY_HEADER, columns, sectioned(rows, columns), list(SCORE_NOTES))

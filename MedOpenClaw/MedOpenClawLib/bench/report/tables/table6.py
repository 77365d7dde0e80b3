"""Table 6: the runtime-agnostic track (Track C: a 2-D slice montage, one turn; or an externally scored pipeline,
`bench score`) against the matched Track A run of the same backbone, the change paired over the shared cases."""

from __future__ import annotations

from collections import defaultdict

from ...model_families import FAMILY_TITLES
from ...modules import RADIOLOGY, of_application
from ..runs import Run
from .grouping import delta_cell, identity_header, identity_of, key_text, main_runs, radiology_score_columns
from .layout import IDENTITY_HEADER, PAIRED_NOTE, SCORE_NOTES, Row, Section, Table

MONTAGE = "2D slice montage"
EXTERNAL = "Externally scored pipeline (bench score)"


def track_a_controls(runs: list[Run]) -> dict[tuple, dict[str, list[Run]]]:
    """backbone -> module -> Track A runs (largest budget): the matched viewer-native runs."""
    found: dict[tuple, dict[str, list[Run]]] = defaultdict(dict)
    for by_module in main_runs([run for run in runs if run.track == "A"]).values():
        for module, module_runs in by_module.items():
            found[module_runs[0].backbone].setdefault(module, module_runs)
    return found


def section_of(row: Row) -> tuple[int, str]:
    """(order, title): what the row is (montage or scored pipeline), its model family, matched or Alt. only."""
    identity = row.identity
    kind = EXTERNAL if identity.get("external") else MONTAGE
    matched = any(cell.delta is not None or cell.unmatched for cell in row.cells.values())
    families = list(FAMILY_TITLES)
    order = (kind == EXTERNAL) * 10 + families.index(identity["family"]) + (0 if matched else 5)
    return order, f"{kind} · {FAMILY_TITLES[identity['family']]}" + ("" if matched else ", Alt. only")


def build(runs: list[Run]) -> Table:
    columns = radiology_score_columns()
    control = track_a_controls(runs)
    rows = []
    for key, by_module in main_runs([run for run in runs if run.track == "C"]).items():
        present = {module: value for module, value in by_module.items() if module in of_application(RADIOLOGY)}
        if not present:
            continue
        first = next(iter(present.values()))[0]
        reference = control.get(first.backbone, {})
        cells = {column.id: delta_cell(present.get(column.module), reference.get(column.module), column.module,
                                       column.metric, key_text(key)) for column in columns}
        identity = identity_of([run for value in present.values() for run in value])
        rows.append(Row(identity_header(identity), cells, identity))
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for row in rows:
        groups[section_of(row)].append(row)
    sections = [Section(title, sorted(groups[(order, title)], key=lambda row: row.header))
                for order, title in sorted(groups)]
    return Table("table6", "Table 6: Runtime-agnostic track (Track C)",
                 "Each cell: the Track C score (a 2-D slice montage answered in one turn, or a pipeline scored with "
                 "`bench score`) and its paired change against the matched Track A run of the same backbone on the "
                 "same cases; Alt.-only rows have no matched viewer-native run. Budget: none (no tool rounds).",
                 IDENTITY_HEADER, columns, sections, [*SCORE_NOTES[:2], PAIRED_NOTE, SCORE_NOTES[2]])

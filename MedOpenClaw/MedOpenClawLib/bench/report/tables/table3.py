"""Table 3: Track B, one column per (operation, module) as published (runs with ``--operators``; the modules' specs
name their operations), against Track A of the same backbone (on the image space the spec names: Registration
against the unregistered native-scan control), one row per backbone and metric; each change is paired over the
cases both cells scored."""

from __future__ import annotations

from collections import Counter, defaultdict

from ...modules import RADIOLOGY, get, of_application, specs
from ...tasks import OPERATION_GROUPS
from ..runs import Run
from .grouping import (
    delta_cell,
    identity_header,
    identity_of,
    key_text,
    main_runs,
    row_key,
    section_order,
    section_title,
)
from .layout import IDENTITY_HEADER, METRIC_LABELS, PAIRED_NOTE, SCORE_NOTES, Column, Row, Section, Table

OPERATION_TITLES = {"segmentation": "Segmentation", "registration": "Registration", "vista3d": "3D VISTA (MONAI)",
                    "all": "All operators", "custom": "Other operator sets"}


def operators_text(runs: list[Run]) -> str:
    """Which operators the agent actually ran: the share of counted episodes that called each successfully."""
    episodes = [episode for run in runs for episode in run.scored]
    counts = Counter(name for episode in episodes for name in episode.operators)
    return ", ".join(f"{name} {count}/{len(episodes)}" for name, count in sorted(counts.items())) or "none"


def controls(runs: list[Run]) -> dict[tuple, list[Run]]:
    """(backbone, module, image space) -> the Track A runs (largest budget) a Track B cell is compared with."""
    found: dict[tuple, list[Run]] = defaultdict(list)
    for by_module in main_runs([run for run in runs if run.track == "A"]).values():
        for module, module_runs in by_module.items():
            for run in module_runs:
                found[(run.backbone, module, run.images)].append(run)
    return found


def published_cells() -> list[tuple[str, str]]:
    """MedFlow-Bench Table 3's columns, (operation, module): by operation, then in the modules' report order."""
    return [(operation, spec.name) for operation in OPERATION_GROUPS for spec in specs()
            if operation in spec.operations]


def build(runs: list[Run]) -> Table:
    """One column per (operation, module), each a Track B run with only that operation's operators against Track A
    of the same backbone on the image space the module's spec names for it (registration: the unregistered
    control). Runs with every operator, or another set, get columns of their own after those."""
    published = published_cells()
    track_b = [run for run in runs if run.track == "B" and run.module in of_application(RADIOLOGY)]
    extra = sorted({(run.operation, run.module) for run in track_b} - set(published),
                   key=lambda cell: (cell[0], of_application(RADIOLOGY).index(cell[1])))
    cells_of_table = [*published, *extra]
    columns = [Column(f"{operation}:{module}", OPERATION_TITLES[operation], get(module).title, module)
               for operation, module in cells_of_table]
    control = controls(runs)
    rows = []
    for key, by_module in main_runs(track_b, lambda run: row_key(run, images=False)).items():
        present = [run for module_runs in by_module.values() for run in module_runs]
        backbone, identity = present[0].backbone, identity_of(present)
        used = operators_text(present)
        for metric in ("task", "strict", "loc"):
            cells = {}
            for operation, module in cells_of_table:
                members = [run for run in by_module.get(module, []) if run.operation == operation]
                space = get(module).operations.get(operation, "atlas")
                cells[f"{operation}:{module}"] = delta_cell(members, control.get((backbone, module, space)),
                                                            module, metric, f"{key_text(key)}|{operation}")
            rows.append(Row([*identity_header(identity), used, METRIC_LABELS[metric]], cells,
                            {**identity, "metric": metric, "operators_called": used}))
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        groups[section_title(row.identity)].append(row)
    sections = [Section(title, groups[title]) for title in sorted(groups, key=lambda text: (section_order(text), text))]
    return Table("table3", "Table 3: Track B, advanced operations",
                 "Each cell: the score after enabling the column's operation (`bench run --track B --operators "
                 "segmentation|registration|vista3d`) and its paired change against the Track A (viewer-native) "
                 "score of the same backbone on the same cases, except Registration on Longitudinal MRI, compared "
                 "with the unregistered native-scan control (Track A on `bench prepare --images native`); "
                 "↑ improvement, ↓ degradation, ↔ no change. 'Operators called': share of counted episodes that ran "
                 "each operator.",
                 (*IDENTITY_HEADER, "Operators called", "Metric"), columns, sections,
                 [*SCORE_NOTES[:2], PAIRED_NOTE, SCORE_NOTES[2]])

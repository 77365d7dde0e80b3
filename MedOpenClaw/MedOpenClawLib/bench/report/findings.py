"""The trace audit in the report: finding rates per model and module (MedFlow-Bench's Section 6 as numbers), the
stability of each case across repeated runs, and a milestone figure per case (MedFlow-Bench's Figure 7).

Each episode's audit is its ``result.json`` ``audit`` block, or -- for runs written before the audit existed --
recomputed from its trace (:func:`episode_audit`). Rates are means over scored episodes with bootstrap intervals,
like every other cell: ``finding:<code>`` is 1 when the episode has at least one finding of that code;
``ungrounded_share`` is the share of the answer's evidence fields nothing grounds; ``milestones_complete`` is
defined for episodes whose workflow was judged (its operations offered).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ...trace_audit import CODES, audit_records, stability
from ..modules import title
from .runs import Episode, Run
from .stats import estimate
from .tables import (
    IDENTITY_HEADER,
    PRIVILEGED_NOTE,
    Cell,
    Column,
    Row,
    Table,
    identity_header,
    identity_of,
    main_runs,
    sectioned,
)

FINDING_METRICS = tuple(f"finding:{code}" for code in CODES)
FINDINGS_GROUP = "Episodes with a finding (share)"
FINDINGS_COLUMNS = [
    Column("module", "Run", "Module", kind="text"),
    Column("audited", "Run", "n", kind="count"),
    Column("finding:any", FINDINGS_GROUP, "any", metric="finding:any"),
    *[Column(metric, FINDINGS_GROUP, metric.split(":")[1], metric=metric) for metric in FINDING_METRICS],
    Column("ungrounded_share", "Evidence", "ungrounded fields", metric="ungrounded_share"),
    Column("milestones_complete", "Evidence", "workflow complete", metric="milestones_complete"),
]
STABILITY_COLUMNS = [
    Column("runs", "Repeats", "runs", kind="count"),
    Column("complete_share", "Repeats", "workflow complete", kind="count"),
    Column("final_view_agreement", "Final views", "agreement", kind="count"),
    Column("final_image_difference", "Final views", "pixel difference", kind="count"),
    Column("runs_without_mask", "Final masks", "no mask", kind="count"),
    Column("mask_bbox_iou", "Final masks", "box IoU", kind="count"),
    Column("mask_volume_cv", "Final masks", "volume CV", kind="count"),
]


def episode_audit(module: str | None, episode: Episode, records: list[dict]) -> dict:
    """The episode's audit block (recomputed from ``records`` when the result predates the audit)."""
    audit = episode.result.get("audit")
    if isinstance(audit, dict) and isinstance(audit.get("findings"), list):
        return audit
    return audit_records(records, module, episode.parsed).to_json()


def audit_metrics(audit: dict) -> dict[str, float | None]:
    """Per-episode values of the findings table."""
    codes = {finding.get("code") for finding in audit.get("findings", []) if isinstance(finding, dict)}
    metrics: dict[str, float | None] = {f"finding:{code}": float(code in codes) for code in CODES}
    metrics["finding:any"] = float(bool(codes))
    fields = [item for item in audit.get("provenance") or [] if isinstance(item, dict)]
    metrics["ungrounded_share"] = (sum(not item.get("grounded") for item in fields) / len(fields)) if fields else None
    progress = audit.get("milestones")
    metrics["milestones_complete"] = float(bool(progress.get("complete"))) if isinstance(progress, dict) else None
    return metrics


def findings_table(runs: list[Run]) -> Table:
    """One row per agent/model/track and module: how often each failure mode occurs."""
    rows = []
    for key, by_module in main_runs(runs).items():
        for module, module_runs in sorted(by_module.items()):
            audited = [episode for run in module_runs for episode in run.scored if "finding:any" in episode.metrics]
            if not audited:
                continue
            name = "|".join(map(str, key)) + f"|{module}"
            cells = {"module": Cell(plain=title(module)), "audited": Cell(plain=len(audited))}
            for column in FINDINGS_COLUMNS[2:]:
                values = [episode.metrics[column.metric] for episode in audited
                          if episode.metrics.get(column.metric) is not None]
                cells[column.id] = Cell(estimate(values, f"{name}|{column.id}"))
            identity = identity_of(module_runs)
            rows.append(Row(identity_header(identity), cells, identity))
    caption = ("Trace audit (docs/trace-audit.md): share of scored episodes with at least one finding of each code "
               "-- EV ungrounded spatial evidence, F1 registration objective drift, F2 pseudo-quantification, F3 "
               "transform-layer misbinding, F4 self-confirming segmentation, G5 incomplete advanced-operation "
               "workflow -- the share of evidence fields nothing in the trace grounds, and the share of judged "
               "episodes completing their workflow milestones. Cells: mean [bootstrap 95% CI].")
    return Table("findings", "Trace audit: failure modes per model and module", caption, IDENTITY_HEADER,
                 FINDINGS_COLUMNS, sectioned(rows, FINDINGS_COLUMNS, mean_rows=False), [PRIVILEGED_NOTE])


def repeated_cases(run: Run) -> dict[str, list[Episode]]:
    """case id -> its scored episodes, for cases run more than once."""
    cases: dict[str, list[Episode]] = defaultdict(list)
    for episode in run.scored:
        cases[episode.case_id].append(episode)
    return {case: episodes for case, episodes in sorted(cases.items()) if len(episodes) > 1}


def _runs_of(episodes: list[Episode]) -> list[dict]:
    return [{"repeat": episode.result.get("repeat"), "trace_dir": str(episode.trace.parent) if episode.trace else None,
             **(episode.audit or {})} for episode in episodes]


def stability_table(runs: list[Run]) -> Table:
    rows = []
    for run in sorted(runs, key=lambda run: run.name):
        for case, episodes in repeated_cases(run).items():
            result = stability(_runs_of(episodes))
            cells = {column.id: Cell(plain=result[column.id]) for column in STABILITY_COLUMNS}
            identity = identity_of([run])
            rows.append(Row([f"{run.name} · {case}", *identity_header(identity)], cells, identity))
    caption = ("Cases run more than once (bench run --repeats N): the share of runs completing the workflow "
               "milestones, the agreement of the final views (same volumes, offsets within 1 mm) and their mean "
               "pixel difference (0..1), and the final masks' spread (runs without a mask, pairwise bounding-box "
               "IoU, volume coefficient of variation).")
    sections = sectioned(rows, STABILITY_COLUMNS, mean_rows=False) if rows else []
    return Table("stability", "Trace audit: stability across repeats", caption, ("Case", *IDENTITY_HEADER),
                 STABILITY_COLUMNS, sections, [PRIVILEGED_NOTE])


# ------------------------------------------------------------------------------------------------- figure
REACHED, MISSED, COMPLETE, INCOMPLETE = "#4caf50", "#e0e0e0", "#2e7d32", "#c62828"


def milestone_plots(runs: list[Run], out_dir: Path) -> list[str]:
    """One figure per repeated case whose workflow was judged: runs as rows, milestones as columns."""
    from .plots import _pyplot, _save

    written = []
    for run in sorted(runs, key=lambda run: run.name):
        for case, episodes in repeated_cases(run).items():
            progress = [(episode.result.get("repeat"), {**item, "status": _status(episode.audit, item)})
                        for episode in episodes
                        for item in [(episode.audit or {}).get("milestones")] if isinstance(item, dict)]
            if not progress:
                continue
            written += _milestone_figure(_pyplot(), _save, run, case, progress, out_dir)
    return written


def _status(audit: dict, progress: dict) -> str:
    """A run's status word: complete, or why not (MedFlow-Bench's red cells: missing, incomplete, unregistered)."""
    if progress.get("complete"):
        return "complete"
    if any(finding.get("rule") == "F3.fusion_unregistered" for finding in audit.get("findings", [])):
        return "unregistered fusion"
    return "incomplete" if progress.get("begun") else "not begun"


def _milestone_figure(pyplot, save, run: Run, case: str, progress: list, out_dir: Path) -> list[str]:
    names = list(progress[0][1]["reached"])
    figure, axes = pyplot.subplots(figsize=(1.3 * (len(names) + 1) + 1.5, 0.45 * len(progress) + 1.4))
    for row, (_, item) in enumerate(progress):
        for column, name in enumerate(names):
            seq = item["reached"].get(name)
            axes.add_patch(pyplot.Rectangle((column, row), 0.92, 0.8, color=REACHED if seq is not None else MISSED))
            axes.text(column + 0.46, row + 0.4, "—" if seq is None else f"#{seq}", ha="center", va="center",
                      fontsize=8)
        status = COMPLETE if item["complete"] else INCOMPLETE
        axes.add_patch(pyplot.Rectangle((len(names), row), 0.92, 0.8, color=status))
        axes.text(len(names) + 0.46, row + 0.4, item["status"], ha="center", va="center", fontsize=8,
                  color="white")
    axes.set_xlim(0, len(names) + 1)
    axes.set_ylim(len(progress), 0)
    axes.set_xticks([index + 0.46 for index in range(len(names) + 1)], [*names, "status"])
    axes.set_yticks([row + 0.4 for row in range(len(progress))], [f"run {repeat}" for repeat, _ in progress])
    axes.tick_params(length=0)
    for spine in axes.spines.values():
        spine.set_visible(False)
    complete = sum(item["complete"] for _, item in progress)
    axes.set_title(f"{case} · {run.name}: {complete} of {len(progress)} runs complete the "
                   f"{progress[0][1]['workflow']} milestones (cell: record number)", fontsize=9)
    safe = "".join(character if character.isalnum() or character in "-_" else "_" for character in
                   f"milestones_{run.name}_{case}")[:120]
    return save(figure, out_dir, safe)

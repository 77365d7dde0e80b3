"""What a report table is made of: columns, cells (an estimate, its paired change, its denominator), rows and
sections. Every format (Markdown, CSV, JSON, LaTeX, HTML) renders these, so they all show the same numbers."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..stats import INTERVAL_NOTE, MISSING, Estimate

METRIC_LABELS = {"task": "Task", "strict": "Strict", "loc": "Loc."}
IDENTITY_HEADER = ("Model", "Provider", "Agent", "Track", "Budget")
PRIVILEGED_NOTE = "† privileged: the reference agent reads the hidden ground truth (a check of the tools and scorers)."
DENOMINATOR_NOTE = ("n = cases (×k: k episodes per case, averaged per case first). A final model-side outcome "
                    "(rejected request, model_length, refusal, unparseable answer) scores 0 in Task and Strict and "
                    "stays in n; only INVALID episodes (environment faults) and provider errors not yet re-run leave "
                    "it, and the n column says how many and why.")
PAIRED_NOTE = ("Changes are paired: the per-case difference over the cases both cells scored (BCa bootstrap; the "
               "count of matched cases is shown); cells that share no case are not differenced.")


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
    delta: Estimate | None = None  # paired change against the reference cell over matched cases (Tables 3, 6)
    reference: Estimate | None = None
    plain: float | str | None = None  # a count or total without an interval (the runs table)
    denominator: dict | None = None  # runs.denominator: episodes left out of n and kept at 0, by reason
    unmatched: bool = False  # a reference exists but shares no case with this cell: not differenced


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


SCORE_NOTES = [INTERVAL_NOTE, DENOMINATOR_NOTE, PRIVILEGED_NOTE]

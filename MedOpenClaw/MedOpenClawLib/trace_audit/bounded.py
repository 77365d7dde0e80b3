"""The stated bounds on what the trace audit keeps, so that it reads a trace of any length in constant memory.

The audit reads a trace once and keeps summaries of what the agent saw and did, never the records: each distinct
thing (a shown image, a returned point, a viewed field, a measured value, a segmentation) once, with the records
that showed or produced it. What it keeps grows with what the episode touched (bounded by the images and the
vocabulary of the tools), not with the number of calls; three caps bound even that for a crafted trace, and
whatever they leave out is said in the report (its ``limits`` block, and the note of each finding or evidence field
whose record list they shortened). An episode of the bench (at most ``max_rounds`` rounds, some hundred records)
stays far below every cap: its audit is exact.

- :data:`SEQS_KEPT`: record numbers listed per cited thing, finding or evidence field (the first ones; all are
  counted);
- :data:`DISTINCT_KEPT`: distinct things one summary keeps (later new ones are counted, not kept);
- :data:`FINDINGS_KEPT`: findings listed per rule (later ones are counted in one closing finding of the rule);
- :data:`BASELINE_KEPT`: system calls with images before the prompt (the last ones; the prompt's baseline views
  are those just before it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

SEQS_KEPT = 256
DISTINCT_KEPT = 4096
FINDINGS_KEPT = 256
BASELINE_KEPT = 64


class Seqs:
    """The record numbers of one thing, in trace order: the first :data:`SEQS_KEPT` kept, every one counted."""

    __slots__ = ("kept", "total", "last")

    def __init__(self, seqs: Iterable[int] = ()):
        self.kept: list[int] = []
        self.total = 0
        self.last: int | None = None
        for seq in seqs:
            self.add(seq)

    def add(self, seq: int) -> None:
        self.last = seq
        self.total += 1
        if len(self.kept) < SEQS_KEPT:
            self.kept.append(seq)

    def extend(self, other: Seqs) -> None:
        """Append ``other``'s numbers (a later reading of the same thing) as they are."""
        self.kept.extend(other.kept[:SEQS_KEPT - len(self.kept)])
        self.total += other.total
        self.last = other.last

    @property
    def first(self) -> int:
        return self.kept[0]

    @property
    def capped(self) -> bool:
        return self.total > len(self.kept)


def listed(groups: Iterable[Seqs]) -> tuple[list[int], bool]:
    """(the sorted distinct record numbers of ``groups``, at most :data:`SEQS_KEPT`; whether any was left out)."""
    groups = list(groups)
    seqs = sorted({seq for group in groups for seq in group.kept})
    return seqs[:SEQS_KEPT], len(seqs) > SEQS_KEPT or any(group.capped for group in groups)


def capped_note(capped: bool) -> str:
    return f" (more records than the {SEQS_KEPT} listed)" if capped else ""


@dataclass
class Distinct:
    """Distinct things by key, in the order first seen, at most :data:`DISTINCT_KEPT` of them; ``what`` names them
    in the report's ``limits`` when a new one had to be left out."""

    what: str
    items: dict = field(default_factory=dict)
    dropped: int = 0

    def add(self, key, item):
        """The thing kept for ``key``: the one seen before, else ``item`` (now kept), else None (the summary is
        full: ``item`` is counted, not kept)."""
        known = self.items.get(key)
        if known is None:
            if len(self.items) >= DISTINCT_KEPT:
                self.dropped += 1
                return None
            known = self.items[key] = item
        return known

    def __iter__(self) -> Iterator:
        return iter(self.items.values())

    def __len__(self) -> int:
        return len(self.items)

    def limit(self) -> dict:
        """The ``limits`` entry of this summary ({} when nothing was left out)."""
        return {self.what: {"kept": len(self.items), "left_out": self.dropped}} if self.dropped else {}

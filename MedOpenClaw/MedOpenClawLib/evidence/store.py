"""The evidence list of an episode. Items are plain data plus, where geometric, a Slicer markups node, so
the same evidence is drawn in the views, exported as ``.mrk.json`` and scored against withheld ground truth.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class EvidenceItem:
    id: str
    kind: str  # bookmark | key_slices | point | roi | line
    label: str
    data: dict
    view_state: dict = field(default_factory=dict)  # where the viewer was when it was captured
    node_id: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


class EvidenceStore:
    def __init__(self):
        self.items: list[EvidenceItem] = []
        self._counter = 0

    def add(self, kind: str, label: str, data: dict, view_state: dict | None = None,
            node_id: str | None = None) -> EvidenceItem:
        self._counter += 1
        item = EvidenceItem(f"ev{self._counter}", kind, label, data, view_state or {}, node_id)
        self.items.append(item)
        return item

    def get(self, item_id: str) -> EvidenceItem | None:
        return next((item for item in self.items if item.id == item_id), None)

    def to_json(self) -> list[dict]:
        return [item.to_json() for item in self.items]

    def checkpoint(self) -> tuple[int, int]:
        return len(self.items), self._counter

    def rollback(self, token: tuple[int, int]) -> None:
        del self.items[token[0]:]
        self._counter = token[1]

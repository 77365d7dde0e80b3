"""Evidence captured in the session, and the links from each claim of the copilot's final answer to it.

Every successful evidence action (bookmark, key slice, point, ROI, measurement) of the session, whether the
copilot's, the clinician's or a REST client's, returns the registry's evidence id (``ev<n>``); the board reads
them from the audit trace, so each item knows the record whose view it was captured in. The system prompt asks
the model to cite those ids in brackets after each claim (``... lesion in the left frontal lobe [ev2].``); the
final answer is split into claims and each claim is linked to the items it cites. Claims that cite nothing, or
cite an id that was never captured, are flagged for the clinician.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

REFERENCE = re.compile(r"\bev\d+\b", re.IGNORECASE)
CITATION = re.compile(r"\[([^\[\]]*\bev\d+\b[^\[\]]*)\]", re.IGNORECASE)
SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([.,;:!?])")
CLAIM_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\[(])|\n+")


@dataclass
class EvidenceItem:
    ref: str
    action: str
    summary: str
    record_seq: int
    arguments: dict = field(default_factory=dict)
    data: dict = field(default_factory=dict)


@dataclass
class Claim:
    text: str
    refs: list[str]
    unknown_refs: list[str]

    @property
    def supported(self) -> bool:
        return bool(self.refs) and not self.unknown_refs


class EvidenceBoard:
    """The evidence items of a session's trace, in capture order."""

    def __init__(self, records: list[dict]):
        self.records = records  # the live list of an AuditTrace: read, never modified
        self.items: list[EvidenceItem] = []
        self._seen = 0

    def refresh(self) -> list[EvidenceItem]:
        """Pick up the evidence recorded since the last call; returns the new items."""
        new = []
        for record in self.records[self._seen:]:
            data = (record.get("result") or {}).get("data") or {}
            if record.get("kind") == "action" and record.get("status") == "ok" and "evidence_id" in data:
                arguments = record.get("arguments") or {}
                new.append(EvidenceItem(data["evidence_id"], record["action"],
                                        summarize(record["action"], arguments, data), record["seq"],
                                        dict(arguments), dict(data)))
        self._seen = len(self.records)
        self.items.extend(new)
        return new

    def get(self, ref: str) -> EvidenceItem | None:
        return next((item for item in self.items if item.ref == ref), None)

    def link_answer(self, answer: str) -> list[Claim]:
        self.refresh()
        known = {item.ref for item in self.items}
        claims = []
        for sentence in split_claims(answer):
            cited = []
            for citation in CITATION.findall(sentence):
                cited.extend(ref.lower() for ref in REFERENCE.findall(citation))
            cited = list(dict.fromkeys(cited))
            text = SPACE_BEFORE_PUNCTUATION.sub(r"\1", CITATION.sub("", sentence)).strip()
            claims.append(Claim(text, [ref for ref in cited if ref in known],
                                [ref for ref in cited if ref not in known]))
        return claims


def split_claims(answer: str) -> list[str]:
    return [part.strip() for part in CLAIM_SPLIT.split(answer) if part and part.strip()]


def summarize(action: str, arguments: dict, data: dict) -> str:
    """A one-line label for the evidence list: the action and the numbers a reader checks first."""
    details = []
    for key in ("label", "view", "offset_mm", "axial_mm", "sagittal_mm", "coronal_mm", "ras", "length_mm", "shape"):
        value = data.get(key, arguments.get(key))
        if value is None:
            continue
        if isinstance(value, float):
            value = round(value, 1)
        elif isinstance(value, (list, tuple)):  # not ``list | tuple``: Python 3.9 in Slicer 5.8
            value = [round(item, 1) if isinstance(item, float) else item for item in value]
        details.append(f"{key}={value}")
    return f"{action} " + ", ".join(details) if details else action

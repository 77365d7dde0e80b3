"""LUMIERE's final answer: its parser (raw response -> canonical answer), its writer (the format a model must
use, which the offline agents write too) and its Table 4 scoring rule.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...cases import GroundTruth
from ...kit.answers import Evidence
from ...kit.parsing import (
    clean_text,
    last_answer,
    last_field,
    parse_choice,
    parse_yes_no,
)
from ...scoring.rules import CaseScore
from .labels import LUMIERE_EVIDENCE_FIELDS, RANO_OPTIONS


def parse(text: str) -> dict:
    errors: list[str] = []
    text = clean_text(text)
    answer = parse_choice(last_answer(text), RANO_OPTIONS, "answer", errors)
    evidence = {name: parse_yes_no(last_field(text, name), name, errors) for name in LUMIERE_EVIDENCE_FIELDS}
    return {"answer": answer, "evidence": evidence, "errors": errors}

def compose(letter: str, fields: dict[str, bool], rationale: str) -> str:
    lines = [f"{name.upper()}: {'YES' if fields.get(name) else 'NO'}" for name in LUMIERE_EVIDENCE_FIELDS]
    return f"{rationale}\n\n" + "\n".join(lines) + f"\nANSWER: {letter}"

def write(answers: Mapping, evidence: Evidence) -> str:
    return compose(answers["answer"], evidence.fields, evidence.rationale)

def score_answer(truth: GroundTruth, parsed: dict, score: CaseScore) -> None:
    score.task = float(parsed.get("answer") is not None and parsed.get("answer") == truth.answers["answer"])
    evidence = parsed.get("evidence") or {}
    fields = {}
    for name in LUMIERE_EVIDENCE_FIELDS:
        expected = truth.evidence_fields.get(name)
        fields[name] = (
            None if expected is None else (evidence.get(name) is not None and evidence.get(name) == expected)
        )
    score.details["fields"] = fields
    gate = all(value for value in fields.values() if value is not None)
    score.gates["evidence_fields"] = gate
    score.strict = score.task if gate else 0.0

"""UCSF-PDGM's final answer: its parser (raw response -> canonical answer), its writer (the format a model must
use, which the offline agents write too) and its Table 4 scoring rule.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...cases import GroundTruth
from ...kit.answers import Evidence, evidence_block
from ...kit.parsing import (
    clean_text,
    last_answer,
    parse_choice,
    parse_radiology_evidence,
)
from ...scoring.rules import CaseScore, radiology_evidence_gates
from .labels import UCSF_OPTIONS


def parse(text: str) -> dict:
    errors: list[str] = []
    text = clean_text(text)
    answer = parse_choice(last_answer(text), UCSF_OPTIONS, "answer", errors)
    return {"answer": answer, "evidence": parse_radiology_evidence(text, errors), "errors": errors}

def compose(letter: str, key_slices: dict | None, ras: list[float] | None, rationale: str) -> str:
    return f"{rationale}\n\n{evidence_block(key_slices, ras)}ANSWER: {letter}"

def write(answers: Mapping, evidence: Evidence) -> str:
    return compose(answers["answer"], evidence.key_slices, evidence.ras, evidence.rationale)

def score_answer(truth: GroundTruth, parsed: dict, score: CaseScore) -> None:
    score.task = float(parsed.get("answer") is not None and parsed.get("answer") == truth.answers["answer"])
    slices_ok, ras_ok = radiology_evidence_gates(truth, parsed.get("evidence") or {}, score.gates)
    score.strict = score.task if slices_ok in (True, None) else 0.0
    score.loc = None if ras_ok is None else float(ras_ok)

"""NSCLC's final answer: its parser (raw response -> canonical answer), its writer (the format a model must
use, which the offline agents write too) and its Table 4 scoring rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ...cases import GroundTruth
from ...kit.answers import Evidence, evidence_block
from ...kit.parsing import (
    clean_text,
    last_field,
    parse_choice,
    parse_radiology_evidence,
)
from ...scoring.rules import CaseScore, radiology_evidence_gates
from .labels import NSCLC_QUESTIONS

_SEP = r"[\s,;:.()\-]*"  # "1C2D3B4A5B", "1C, 2D, 3B, 4A, 5B", "1: C; 2: D; ...", "1(C) 2(D) ..."


_COMPACT = re.compile(
    "".join(rf"{number}{_SEP}([A-Za-z])(?![A-Za-z])" + ("" if number == 5 else _SEP) for number in range(1, 6))
)


def parse(text: str) -> dict:
    """Five answers from the last compact string ``1C2D3B4A5B`` (spaces, commas, colons tolerated); letters outside a
    question's option range are null with an error. Without a full string, ``Q1: C`` style lines are read one by one."""
    errors: list[str] = []
    text = clean_text(text)
    answers: dict[str, str | None] = {}
    matches = _COMPACT.findall(text)
    for index, (qid, _, options) in enumerate(NSCLC_QUESTIONS):
        if matches:
            letter = matches[-1][index].upper()
            valid = {option_letter for option_letter, _ in options}
            if letter in valid:
                answers[qid] = letter
            else:
                answers[qid] = None
                errors.append(f"{qid}: {letter} is not an option (valid {''.join(sorted(valid))})")
        else:
            answers[qid] = parse_choice(last_field(text, qid), options, qid, errors)
    if not matches:
        errors.append("no compact answer string like 1C2D3B4A5B found")
    return {"answers": answers, "evidence": parse_radiology_evidence(text, errors), "errors": errors}

def compose(letters: dict[str, str], key_slices: dict | None, ras: list[float] | None, rationale: str) -> str:
    # an unscored question (clinical value outside the label set, answer None) still needs a letter to parse
    compact = "".join(f"{qid[1:]}{letters[qid] or options[0][0]}" for qid, _, options in NSCLC_QUESTIONS)
    return f"{rationale}\n\n{evidence_block(key_slices, ras)}{compact}"

def write(answers: Mapping, evidence: Evidence) -> str:
    return compose(answers, evidence.key_slices, evidence.ras, evidence.rationale)

def score_answer(truth: GroundTruth, parsed: dict, score: CaseScore) -> None:
    answers = parsed.get("answers") or {}
    # a question whose clinical value lies outside MedFlow-Bench's label set has no answer (None): not scored, and
    # recorded as None so every aggregation leaves it out of that question's denominator
    correct = {
        qid: None if truth.answers.get(qid) is None else answers.get(qid) == truth.answers[qid]
        for qid, _, _ in NSCLC_QUESTIONS
    }
    score.details["questions"] = correct
    scored = [value for value in correct.values() if value is not None]
    score.task = sum(scored) / len(scored) if scored else 0.0
    slices_ok, ras_ok = radiology_evidence_gates(truth, parsed.get("evidence") or {}, score.gates)
    gate = None if slices_ok is None else (slices_ok and ras_ok)
    score.gates["evidence"] = gate
    score.strict = score.task if gate in (True, None) else 0.0
    score.loc = None if ras_ok is None else float(ras_ok)

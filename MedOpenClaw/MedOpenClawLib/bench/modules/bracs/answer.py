"""BRACS's final answer: its parser (raw response -> canonical answer), its writer (the format a model must
use, which the offline agents write too) and its Table 4 scoring rule.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ...cases import GroundTruth
from ...kit.answers import Evidence
from ...kit.parsing import (
    agreeing,
    find_json_object,
    parse_localizations,
)
from ...scoring.rules import CaseScore, pathology_gate
from .labels import BRACS_LABELS, BRACS_OPTIONS, normalize_bracs_label


def parse(text: str) -> dict:
    errors: list[str] = []
    body = find_json_object(text, ("wsi_label", "selected_option", "localizations"))
    if body is None:
        return {
            "answer": None,
            "localizations": [],
            "errors": ["no JSON object with wsi_label/selected_option"],
        }
    label_errors: list[str] = []
    answer = agreeing(
        body.get("selected_option"),
        body.get("wsi_label"),
        BRACS_OPTIONS,
        normalize_bracs_label,
        "wsi_label",
        label_errors,
    )
    errors.extend(label_errors)
    if answer is not None and answer not in BRACS_LABELS:
        answer = None
    return {
        "answer": answer,
        "localizations": parse_localizations(body.get("localizations"), errors),
        "errors": errors,
    }

def compose(label: str, points: list[list[float]], rationale: str, confidence: float = 0.5) -> str:
    option = next(letter for letter, name in BRACS_OPTIONS if name == label)
    return json.dumps({
        "selected_option": option,
        "wsi_label": label,
        "confidence": confidence,
        "brief_rationale": rationale,
        "localizations": [{"x": round(x, 1), "y": round(y, 1)} for x, y in points],
    })

def write(answers: Mapping, evidence: Evidence) -> str:
    """A benign-normal ("N") slide cites no location."""
    label = answers["answer"]
    return compose(label, [] if label == "N" else evidence.points, evidence.rationale, confidence=1.0)

def score_answer(truth: GroundTruth, parsed: dict, score: CaseScore) -> None:
    label = truth.answers["answer"]
    score.task = float(parsed.get("answer") is not None and parsed.get("answer") == label)
    points = parsed.get("localizations") or []
    matching = [region for region in truth.regions if region.get("kind") == "roi" and region.get("label") == label]
    pathology_gate(score, label == "N", points, matching, [], "roi_hit")

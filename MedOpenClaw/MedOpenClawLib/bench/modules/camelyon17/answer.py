"""CAMELYON17's final answer: its parser (raw response -> canonical answer), its writer (the format a model must
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
    normalizer,
    parse_localizations,
)
from ...scoring.rules import CaseScore, pathology_gate
from .labels import METASTASIS_OPTIONS, TUMOR_PRESENCE_OPTIONS


def parse(text: str) -> dict:
    errors: list[str] = []
    keys = ("tumor_presence", "tumor_presence_option", "largest_metastasis", "largest_metastasis_option")
    body = find_json_object(text, keys + ("localizations",))
    if body is None:
        return {
            "tumor_presence": None,
            "largest_metastasis": None,
            "localizations": [],
            "errors": ["no JSON object with tumor_presence/largest_metastasis"],
        }
    presence_errors: list[str] = []
    presence = agreeing(
        body.get("tumor_presence_option"),
        body.get("tumor_presence"),
        TUMOR_PRESENCE_OPTIONS,
        normalizer(("no_tumor", "tumor_present")),
        "tumor_presence",
        presence_errors,
    )
    metastasis_errors: list[str] = []
    metastasis = agreeing(
        body.get("largest_metastasis_option"),
        body.get("largest_metastasis"),
        METASTASIS_OPTIONS,
        normalizer(("negative", "itc", "micro", "macro")),
        "largest_metastasis",
        metastasis_errors,
    )
    errors.extend(presence_errors + metastasis_errors)
    return {
        "tumor_presence": presence,
        "largest_metastasis": metastasis,
        "localizations": parse_localizations(body.get("localizations"), errors),
        "errors": errors,
    }

def compose(presence: str, metastasis: str, points: list[list[float]], rationale: str,
                    confidence: float = 0.5) -> str:
    return json.dumps({
        "tumor_presence_option": next(letter for letter, name in TUMOR_PRESENCE_OPTIONS if name == presence),
        "tumor_presence": presence,
        "largest_metastasis_option": next(letter for letter, name in METASTASIS_OPTIONS if name == metastasis),
        "largest_metastasis": metastasis,
        "confidence": confidence,
        "brief_rationale": rationale,
        "localizations": [{"x": round(x, 1), "y": round(y, 1)} for x, y in points],
    })

def write(answers: Mapping, evidence: Evidence) -> str:
    """A slide without tumour cites no location."""
    presence = answers["tumor_presence"]
    points = evidence.points if presence == "tumor_present" else []
    return compose(presence, answers["largest_metastasis"], points, evidence.rationale, confidence=1.0)

def score_answer(truth: GroundTruth, parsed: dict, score: CaseScore) -> None:
    presence_ok = (
        parsed.get("tumor_presence") is not None
        and parsed["tumor_presence"] == truth.answers["tumor_presence"]
    )
    category_ok = (
        parsed.get("largest_metastasis") is not None
        and parsed["largest_metastasis"] == truth.answers["largest_metastasis"]
    )
    score.details.update({"tumor_presence": presence_ok, "largest_metastasis": category_ok})
    score.task = float(presence_ok and category_ok)
    points = parsed.get("localizations") or []
    tumours = [region for region in truth.regions if region.get("kind") == "tumor"]
    exclusions = [region for region in truth.regions if region.get("kind") == "exclusion"]
    pathology_gate(score, truth.answers["tumor_presence"] == "no_tumor", points, tumours, exclusions, "tumor_hit")

"""Final-answer text in each module's required format (MedFlow-Bench App. H), for the offline agents.

The offline agents answer in exactly the form a model must use, so their output goes through the same parsers
and scorers as a model's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..labels import BRACS_OPTIONS, LUMIERE_EVIDENCE_FIELDS, METASTASIS_OPTIONS, NSCLC_QUESTIONS, TUMOR_PRESENCE_OPTIONS


@dataclass(frozen=True)
class Evidence:
    """What a final answer cites beside its answers: key slices and a RAS point (brain, thorax), level-0 slide
    points (slides), the LUMIERE evidence fields, and the rationale line."""

    key_slices: dict | None = None  # axial/sagittal/coronal -> canonical RAS mm
    ras: list[float] | None = None
    points: list[list[float]] = field(default_factory=list)
    fields: Mapping[str, bool] = field(default_factory=dict)
    rationale: str = "Reference solution."

    @classmethod
    def of_truth(cls, truth) -> Evidence:
        """The ground truth's own reference evidence (no tools involved): what a correct answer may cite."""
        loc = truth.localization or {}
        return cls(key_slices=loc.get("reference_key_slices"), ras=loc.get("reference_ras"),
                   points=[region["reference_point"] for region in truth.regions if "reference_point" in region],
                   fields={name: bool(value) for name, value in truth.evidence_fields.items()})


def evidence_block(key_slices: dict | None, ras: list[float] | None) -> str:
    """``EVIDENCE:`` block; ``key_slices`` maps axial/sagittal/coronal to canonical RAS mm."""
    if not key_slices:
        return ""
    lines = ["EVIDENCE:"]
    for view in ("axial", "sagittal", "coronal"):
        lines.append(f"KEY_SLICE_{view.upper()}_MM: {float(key_slices[view]):.2f}")
    if ras is not None:
        lines.append("RAS: [" + ", ".join(f"{float(value):.2f}" for value in ras) + "]")
    return "\n".join(lines) + "\n"


def ucsf_answer(letter: str, key_slices: dict | None, ras: list[float] | None, rationale: str) -> str:
    return f"{rationale}\n\n{evidence_block(key_slices, ras)}ANSWER: {letter}"


def nsclc_answer(letters: dict[str, str], key_slices: dict | None, ras: list[float] | None, rationale: str) -> str:
    # an unscored question (clinical value outside the label set, answer None) still needs a letter to parse
    compact = "".join(f"{qid[1:]}{letters[qid] or options[0][0]}" for qid, _, options in NSCLC_QUESTIONS)
    return f"{rationale}\n\n{evidence_block(key_slices, ras)}{compact}"


def lumiere_answer(letter: str, fields: dict[str, bool], rationale: str) -> str:
    lines = [f"{name.upper()}: {'YES' if fields.get(name) else 'NO'}" for name in LUMIERE_EVIDENCE_FIELDS]
    return f"{rationale}\n\n" + "\n".join(lines) + f"\nANSWER: {letter}"


def bracs_answer(label: str, points: list[list[float]], rationale: str, confidence: float = 0.5) -> str:
    option = next(letter for letter, name in BRACS_OPTIONS if name == label)
    return json.dumps({
        "selected_option": option,
        "wsi_label": label,
        "confidence": confidence,
        "brief_rationale": rationale,
        "localizations": [{"x": round(x, 1), "y": round(y, 1)} for x, y in points],
    })


def camelyon_answer(presence: str, metastasis: str, points: list[list[float]], rationale: str,
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


# ``ModuleSpec.write_answer`` of each module: the final answer for ``answers`` shaped like the ground truth's
# (``GroundTruth.answers``), citing ``evidence``. The oracle writes its answer with it from the truth; scripts
# write reference and constant-probe answers with it.


def write_ucsf(answers: Mapping, evidence: Evidence) -> str:
    return ucsf_answer(answers["answer"], evidence.key_slices, evidence.ras, evidence.rationale)


def write_nsclc(answers: Mapping, evidence: Evidence) -> str:
    return nsclc_answer(answers, evidence.key_slices, evidence.ras, evidence.rationale)


def write_lumiere(answers: Mapping, evidence: Evidence) -> str:
    return lumiere_answer(answers["answer"], evidence.fields, evidence.rationale)


def write_bracs(answers: Mapping, evidence: Evidence) -> str:
    """A benign-normal ("N") slide cites no location."""
    label = answers["answer"]
    return bracs_answer(label, [] if label == "N" else evidence.points, evidence.rationale, confidence=1.0)


def write_camelyon(answers: Mapping, evidence: Evidence) -> str:
    """A slide without tumour cites no location."""
    presence = answers["tumor_presence"]
    points = evidence.points if presence == "tumor_present" else []
    return camelyon_answer(presence, answers["largest_metastasis"], points, evidence.rationale, confidence=1.0)

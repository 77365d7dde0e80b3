"""Final-answer text in each module's required format (MedFlow-Bench App. H), for the offline agents.

The offline agents answer in exactly the form a model must use, so their output goes through the same parsers
and scorers as a model's.
"""

from __future__ import annotations

import json

from ..labels import BRACS_OPTIONS, LUMIERE_EVIDENCE_FIELDS, METASTASIS_OPTIONS, NSCLC_QUESTIONS, TUMOR_PRESENCE_OPTIONS


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

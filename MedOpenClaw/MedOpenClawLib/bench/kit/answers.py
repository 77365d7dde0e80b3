"""Final-answer text in each module's required format (MedFlow-Bench App. H), for the offline agents.

The offline agents answer in exactly the form a model must use, so their output goes through the same parsers
and scorers as a model's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Evidence:
    """What a final answer cites beside its answers: key slices and a RAS point (brain, thorax), level-0 slide
    points (slides), yes/no evidence fields, and the rationale line."""

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


# ``ModuleSpec.write_answer`` of each module: the final answer for ``answers`` shaped like the ground truth's
# (``GroundTruth.answers``), citing ``evidence``. The oracle writes its answer with it from the truth; scripts
# write reference and constant-probe answers with it.



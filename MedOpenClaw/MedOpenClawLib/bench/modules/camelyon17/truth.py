"""CAMELYON17's own ground-truth check (one of its spec's ``truth_checks``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...cases import Case, GroundTruth
    from ...spec import ModuleSpec


def camelyon_problems(case: Case, truth: GroundTruth, spec: ModuleSpec) -> list[str]:
    """A CAMELYON17 presence answer that matches its metastasis category, and no tumour on a negative slide."""
    problems = []
    category = truth.answers.get("largest_metastasis")
    presence = truth.answers.get("tumor_presence")
    if (category == "negative") != (presence == "no_tumor"):
        problems.append(f"tumor_presence={presence!r} contradicts largest_metastasis={category!r}")
    if category == "negative" and any(region.get("kind") == "tumor" for region in truth.regions):
        problems.append("a negative slide has tumour regions")
    return problems

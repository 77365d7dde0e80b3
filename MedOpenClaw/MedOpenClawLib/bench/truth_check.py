"""Ground-truth self-consistency: one rule set derives every ground-truth field that can be derived from
masks and labels, and :func:`check_ground_truth` re-derives them from the files a package actually holds.

``PackageWriter.add`` runs the check for every case of every module (real datasets, the synthetic cohort and
hand-written fixtures alike); a case whose reference contradicts itself is excluded from the package with the
contradictions as its reason (printed by ``bench prepare`` and kept in the manifest), because it would score
agents against an impossible reference -- and one such case must not abort the rest of the dataset.

Rules (each a function below, used by the loaders, the synthetic generators and this checker):

- answers: every question of the case has an answer that is one of its options, and ``labels`` names the same
  option; the spec's no-lesion answer has no localization and tumour answers have one.
- localization: the mask exists and is non-empty; ``ras_ranges`` equal the mask's (half-voxel rule);
  ``reference_ras`` lies in the mask; ``reference_key_slices`` lie in the ranges; ``source_volume_name`` is
  one of the case's volumes.
- pathology regions: each reference point lies inside its polygon and outside every exclusion.
- a module's own rules (e.g. lesion-state fields re-derived from the hidden segmentations) live in its folder
  and join through its spec's ``truth_checks``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .cases import Case, GroundTruth
from .scoring.geometry import area_covers, evidence_area, key_slice_in_range, mask_from_file, region_geometry

if TYPE_CHECKING:
    from .spec import ModuleSpec

RANGE_TOLERANCE_MM = 1e-3


# ------------------------------------------------------------------------------------------- the checker
def _answer_problems(case: Case, truth: GroundTruth) -> list[str]:
    problems = []
    for question in case.questions:
        value = truth.answers.get(question.qid)
        if value is None and question.qid in truth.answers and "not scored" in str(truth.labels.get(question.qid)):
            continue  # a clinical value outside the label set, recorded as unscored
        options = dict(question.options)
        letter = value if value in options else next((k for k, v in options.items() if v == value), None)
        if letter is None:
            problems.append(f"answer {question.qid}={value!r} is not an option of the question")
            continue
        label = truth.labels.get(question.qid)
        if label is not None and label != options[letter] and label != letter:
            problems.append(f"answer {question.qid}={value!r} ({options[letter]}) but its label says {label!r}")
    return problems


def says_no_lesion(case: Case, truth: GroundTruth, spec: ModuleSpec) -> bool:
    """Whether the answer key says there is no lesion: the option its spec names ``no_lesion_answer`` (the
    whole label, e.g. "No tumor") chosen for the first question."""
    if not case.questions or spec.no_lesion_answer is None:
        return False
    question = case.questions[0]
    value = truth.answers.get(question.qid)
    return dict(question.options).get(value, value) == spec.no_lesion_answer


def localization_problems(case: Case, truth: GroundTruth, spec: ModuleSpec) -> list[str]:
    """The lesion-mask localization block of the modules scored by RAS point and key slices."""
    block = truth.localization
    if block is None:
        return [] if says_no_lesion(case, truth, spec) else ["a tumour answer has no localization"]
    if says_no_lesion(case, truth, spec):
        return [f"a {spec.no_lesion_answer!r} answer has a lesion localization"]
    problems = []
    if case.volumes and block.get("source_volume_name") not in {volume.name for volume in case.volumes}:
        problems.append(f"source_volume_name {block.get('source_volume_name')!r} is not a volume of the case")
    path = truth.mask_path
    if path is None or not path.is_file():
        return [*problems, f"localization mask {block.get('mask')!r} is missing"]
    mask = mask_from_file(path)
    if not mask.data.any():
        return [*problems, "localization mask is empty"]
    ranges = mask.ras_ranges()
    stored = block.get("ras_ranges") or {}
    for axis, (low, high) in ranges.items():
        got = stored.get(axis)
        if got is None or abs(got[0] - low) > RANGE_TOLERANCE_MM or abs(got[1] - high) > RANGE_TOLERANCE_MM:
            problems.append(f"ras_ranges[{axis}]={got} but the mask covers [{low:.4f}, {high:.4f}]")
    if not mask.contains(block.get("reference_ras") or [np.nan] * 3):
        problems.append(f"reference_ras {block.get('reference_ras')} is not inside the mask")
    for view, offset in (block.get("reference_key_slices") or {}).items():
        if not key_slice_in_range(offset, ranges, view):
            problems.append(f"reference key slice {view}={offset} is outside the mask")
    return problems


def region_problems(case: Case, truth: GroundTruth, spec: ModuleSpec) -> list[str]:
    """Pathology reference points: inside their own region (holes honoured) and outside every exclusion."""
    problems = []
    exclusions = [region for region in truth.regions if region.get("kind") == "exclusion"]
    for region in truth.regions:
        if region.get("kind") == "exclusion":
            continue
        point = region.get("reference_point")
        if point is None or not area_covers(region_geometry(region), *point):
            problems.append(f"{region.get('kind')} region {region.get('label')!r}: reference point not inside it")
        elif not area_covers(evidence_area([region], exclusions), *point):
            problems.append(f"{region.get('kind')} region {region.get('label')!r}: reference point in an exclusion")
    return problems


def slide_size_problems(case: Case, truth: GroundTruth, spec: ModuleSpec) -> list[str]:
    size = truth.slide_size
    if size and len(size) == 2 and min(size) > 0:
        return []
    return [f"slide_size {size} is not a positive width and height"]


def check_ground_truth(case: Case, truth: GroundTruth, spec: ModuleSpec) -> list[str]:
    """Every contradiction between ``truth`` and what its masks/labels imply (empty when consistent): the answer
    check and the module's own rules (its spec's ``truth_checks``, e.g. its localization block).

    ``truth.hidden_dir`` must point at the case's hidden directory (where masks and segmentations are).
    """
    problems = _answer_problems(case, truth)
    for check in spec.truth_checks:
        problems += check(case, truth, spec)
    return problems

"""Ground-truth self-consistency: one rule set derives every ground-truth field that can be derived from
masks and labels, and :func:`check_ground_truth` re-derives them from the files a package actually holds.

``PackageWriter.add`` runs the check for every case of every module (real datasets, the synthetic cohort and
hand-written fixtures alike); a case whose reference contradicts itself is excluded from the package with the
contradictions as its reason (printed by ``bench prepare`` and kept in the manifest), because it would score
agents against an impossible reference -- and one such case must not abort the rest of the dataset.

Rules (each a function below, used by the loaders, the synthetic generators and this checker):

- answers: every question of the case has an answer that is one of its options, and ``labels`` names the same
  option; the spec's no-lesion answer ("No tumor") has no localization and tumour answers have one.
- localization: the mask exists and is non-empty; ``ras_ranges`` equal the mask's (half-voxel rule);
  ``reference_ras`` lies in the mask; ``reference_key_slices`` lie in the ranges; ``source_volume_name`` is
  one of the case's volumes.
- LUMIERE lesion fields: recomputed from the hidden DeepBraTumIA segmentations with :func:`lesion_fields`
  (the RANO size rule of :func:`lesion_size`);
  a ``new_*`` lesion is also a ``current_*`` one; NonMeasurableLesions = yes requires a non-target
  (non-measurable) enhancing lesion in the CURRENT mask.
- Pathology regions: each reference point lies inside its polygon and outside every exclusion; a negative
  CAMELYON17 slide has no tumour region and its presence answer matches its metastasis category.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .cases import Case, GroundTruth
from .scoring.geometry import area_covers, evidence_area, key_slice_in_range, mask_from_file, region_geometry

if TYPE_CHECKING:
    from .spec import ModuleSpec

MEASURABLE_MM = 10.0  # RANO (Wen et al. 2010): two perpendicular diameters of an enhancing lesion >= 10 mm
MEASURABLE_SLICES = 2  # ... visible on two or more axial slices
LESION_FLOOR_MM = 5.0  # below this longest diameter a mask component is segmentation noise, not a lesion
RANGE_TOLERANCE_MM = 1e-3
LESION_FIELDS = ("current_target_lesion", "new_target_lesion", "current_non_target_lesion", "new_non_target_lesion")


# --------------------------------------------------------------------------------------------- the rules
def axial_diameters(section: np.ndarray, spacing_mm) -> tuple[float, float]:
    """(longest diameter, longest extent perpendicular to it) in mm of one axial cross-section, measured over
    the outer corners of its voxels (a single 1 mm voxel spans 1.41 mm along its diagonal)."""
    from scipy.spatial import ConvexHull

    cells = np.argwhere(section)
    corners = np.unique(np.concatenate([cells + offset for offset in ((0, 0), (0, 1), (1, 0), (1, 1))]), axis=0)
    points = corners * np.asarray(spacing_mm, dtype=float)[:2]
    points = points[ConvexHull(points).vertices]
    gaps = points[:, None, :] - points[None, :, :]
    lengths = np.sqrt((gaps ** 2).sum(axis=-1))
    first, second = np.unravel_index(int(np.argmax(lengths)), lengths.shape)
    longest = float(lengths[first, second])
    direction = gaps[first, second] / longest
    across = points @ np.array([-direction[1], direction[0]])
    return longest, float(across.max() - across.min())


def lesion_size(component: np.ndarray, spacing_mm) -> str:
    """``"target"`` when RANO-measurable (on some axial slice both the longest diameter and the longest extent
    perpendicular to it are >= 10 mm, and the lesion shows on >= 2 axial slices), ``"non_target"`` for any
    other lesion, ``"noise"`` when its longest in-plane diameter stays below 5 mm on every slice (a speck of
    the automatic mask that no reader would call a lesion)."""
    slices = [k for k in range(component.shape[2]) if component[:, :, k].any()]
    diameters = [axial_diameters(component[:, :, k], spacing_mm) for k in slices]
    if max(longest for longest, _ in diameters) < LESION_FLOOR_MM:
        return "noise"
    bidimensional = any(min(pair) >= MEASURABLE_MM for pair in diameters)
    return "target" if bidimensional and len(slices) >= MEASURABLE_SLICES else "non_target"


def lesion_fields(old: np.ndarray | None, current: np.ndarray | None, spacing_mm, enhancing_label: int) -> dict:
    """The four target/non-target fields of CURRENT from two label maps on one grid (None when unknown).

    Each connected enhancing component of CURRENT is sized by :func:`lesion_size` (noise is ignored); a lesion
    is new when it does not touch OLD's tumour (any label, dilated by one voxel).
    """
    from scipy import ndimage

    if old is None or current is None or old.shape != current.shape:
        return dict.fromkeys(LESION_FIELDS)
    old_tumour = ndimage.binary_dilation(old > 0)
    components, _ = ndimage.label(current == enhancing_label)
    fields = dict.fromkeys(LESION_FIELDS, False)
    for index, region in enumerate(ndimage.find_objects(components), 1):
        component = components[region] == index
        kind = lesion_size(component, spacing_mm)
        if kind == "noise":
            continue
        new = not old_tumour[region][component].any()
        fields[f"current_{kind}_lesion"] = True
        fields[f"new_{kind}_lesion"] = fields[f"new_{kind}_lesion"] or new
    return fields


def label_map(path) -> tuple[np.ndarray, np.ndarray] | None:
    """(integer label array, voxel spacing in mm) of a segmentation NIfTI, or None when there is none."""
    import nibabel as nib

    if path is None or not path.is_file():
        return None
    image = nib.load(path)
    return np.asarray(image.dataobj), np.sqrt((np.asarray(image.affine)[:3, :3] ** 2).sum(axis=0))


def lesion_fields_of_files(old_path, current_path, enhancing_label: int) -> dict:
    old, current = label_map(old_path), label_map(current_path)
    if old is None or current is None:
        return lesion_fields(None, None, (1.0, 1.0, 1.0), enhancing_label)
    return lesion_fields(old[0], current[0], current[1], enhancing_label)


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


def enhancing_label_of(truth: GroundTruth) -> int:
    """The DeepBraTumIA label the LUMIERE loader took as enhancing tumour (recorded in the hidden labels)."""
    return int((truth.labels.get("segmentation_labels") or {}).get("enhancing", 2))


def lumiere_problems(case: Case, truth: GroundTruth, spec: ModuleSpec) -> list[str]:
    """The LUMIERE lesion-state fields against the hidden segmentations and against each other."""
    enhancing_label = enhancing_label_of(truth)
    hidden = truth.hidden_dir
    stored = truth.evidence_fields
    problems = []
    if hidden is not None:
        derived = lesion_fields_of_files(hidden / "old_seg.nii.gz", hidden / "current_seg.nii.gz", enhancing_label)
        for name, value in derived.items():
            if stored.get(name) != value:
                problems.append(f"{name}={stored.get(name)} but the segmentations give {value}")
    for kind in ("target", "non_target"):
        if stored.get(f"new_{kind}_lesion") and stored.get(f"current_{kind}_lesion") is False:
            problems.append(f"new_{kind}_lesion is true but current_{kind}_lesion is false")
    if stored.get("non_measurable_lesion") and stored.get("current_non_target_lesion") is False:
        problems.append(
            "NonMeasurableLesions = yes but the CURRENT segmentation has no non-measurable enhancing lesion "
            "(current_non_target_lesion = false)"
        )
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

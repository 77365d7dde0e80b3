"""LUMIERE: ``Imaging/Patient-NNN/week-NNN[-k]/`` + ``LUMIERE-ExpertRating-v202211.csv`` -> lumiere packages.

Cases are consecutive imaged timepoints (OLD, CURRENT) of a patient whose CURRENT rating normalises to a RANO
label (``"Post-Op "``, ``"Pre-Op"`` and mixed ``"Post-Op/PD"`` ratings are not responses). Images come from
``DeepBraTumIA-segmentation/atlas/skull_strip/{ct1,t1,t2,flair}_skull_strip.nii.gz`` (MedFlow-Bench's atlas-space
skull-stripped MRI, co-registered across timepoints); ``images="native"`` takes the native ``{CT1,T1,T2,FLAIR}.nii.gz``
instead -- each study in its own space, the unregistered control of Table 3's Registration column (the hidden
lesion fields still come from the atlas masks). Image space is a condition of every case (``image_space`` in the
manifest entry and the ground truth, recorded in run.json and the report's row key): a pair is taken only when
both studies hold the requested space; a study without it is never replaced by the other space's files, and the
pair is excluded with the spaces each study holds as the reason.

Evidence fields of the CURRENT study:
- non_measurable_lesion: the CSV's NonMeasurableLesions column (``x``/yes/1 = true, empty/no/0 = false).
- t2_progression: :func:`t2_progression` of the rating rationale (``"T2-Progr."`` YES, ``"no T2-Progr."`` NO);
  null when the rationale is empty.
- current/new target and non-target lesions: from the DeepBraTumIA segmentations (atlas space, so OLD and
  CURRENT share a grid) by ``lesions.lesion_fields`` (the one rule the ground-truth checker re-applies):
  each connected enhancing component of CURRENT is a target lesion when RANO-measurable (two perpendicular
  in-plane diameters >= 10 mm, on >= 2 axial slices), a non-target lesion when smaller, and segmentation noise
  (ignored) when its longest in-plane diameter is under 5 mm; it is new when it does not touch OLD's tumour
  (any label, dilated by one voxel). Null when a segmentation is missing. A case whose expert
  NonMeasurableLesions disagrees with its mask is excluded with that reason (the ground-truth check).

DeepBraTumIA label mapping (which value is the enhancing core): not guessed. Each study ships
``atlas/segmentation/measured_volumes_in_mm3.json`` (``Enhancing_Core``, ``Necrotic_NonEnhancing``,
``Edema_Compartment``); :func:`derive_label_mapping` compares every compartment volume with the voxel volume of
each label of ``seg_mask.nii.gz`` and keeps the labels that match in every study. Public analyses of the real
archive report ``Enhancing_Core`` = label 1 in 599/599 masks (label 2 = necrotic/non-enhancing, 3 = oedema),
which is the default when no study has the file; a study whose file matches no label refuses prepare, and the
mapping used (with its evidence) is written to the manifest as ``segmentation_labels``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ...cases import IMAGE_SPACES, CaseFormatError, GroundTruth, VolumeRef
from ...kit.loading import SkipCase, column, decoded_nifti_shape, find_one, read_csv_rows, volume_case
from ...package import PackageWriter, place_file
from .labels import RANO_OPTIONS, normalize_rano
from .lesions import label_map, lesion_fields_of_files

MODALITIES = ("CT1", "T1", "T2", "FLAIR")
COMPARTMENT_KEYS = {"enhancing": "Enhancing_Core", "necrosis": "Necrotic_NonEnhancing", "edema": "Edema_Compartment"}
DEFAULT_LABELS = {"enhancing": 1, "necrosis": 2, "edema": 3}  # public analyses: Enhancing_Core == label 1
MEASURED_VOLUMES = "measured_volumes_in_mm3.json"
EVIDENCE_STEP = "evidence available (both segmentations)"
IMAGE_SPACE_STEP = "both studies in the requested image space"


def _week_key(name: str) -> tuple[int, int]:
    match = re.fullmatch(r"week-(\d+)(?:-(\d+))?", name)
    return (int(match.group(1)), int(match.group(2) or 0)) if match else (10**9, 0)


def _images(study: Path, space: str) -> dict[str, Path] | None:
    """The study's four sequences in image space ``space`` (``atlas``: DeepBraTumIA's skull-stripped atlas
    registration; ``native``: the scanner's), or None when that space lacks one of them -- never the other
    space's files in their place."""
    atlas = study / "DeepBraTumIA-segmentation" / "atlas" / "skull_strip"
    paths = ({name: atlas / f"{name.lower()}_skull_strip.nii.gz" for name in MODALITIES} if space == "atlas"
             else {name: study / f"{name}.nii.gz" for name in MODALITIES})
    return paths if all(path.is_file() for path in paths.values()) else None


def _pair_images(old: Path, current: Path, space: str) -> dict[str, dict[str, Path]]:
    """OLD's and CURRENT's sequences, both in ``space``; SkipCase naming each study's spaces when not."""
    found = {"OLD": _images(old, space), "CURRENT": _images(current, space)}
    if all(files is not None for files in found.values()):
        return found
    spaces = {role: [name for name in IMAGE_SPACES if _images(study, name) is not None]
              for role, study in (("OLD", old), ("CURRENT", current))}
    held = "; ".join(f"{role} {study.name}: {' and '.join(spaces[role]) or 'no complete CT1/T1/T2/FLAIR set'}"
                     for role, study in (("OLD", old), ("CURRENT", current)))
    if not all(spaces.values()):
        raise SkipCase(f"a study lacks CT1/T1/T2/FLAIR ({held})", "complete imaging")
    hint = " (`bench prepare --images native` scores the pair as the unregistered control)" if all(
        "native" in names for names in spaces.values()) else ""
    raise SkipCase(f"studies not both in {space} space ({held}){hint}", IMAGE_SPACE_STEP)


def _segmentation(study: Path) -> Path | None:
    path = study / "DeepBraTumIA-segmentation" / "atlas" / "segmentation" / "seg_mask.nii.gz"
    return path if path.is_file() else None


def _measured_volumes(study: Path) -> dict | None:
    path = study / "DeepBraTumIA-segmentation" / "atlas" / "segmentation" / MEASURED_VOLUMES
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError) as error:
        raise CaseFormatError(f"{path}: unreadable measured volumes: {error}") from error


def matching_labels(measured: dict, segmentation: Path) -> dict[str, set[int]]:
    """Per compartment with a non-zero measured volume: the labels whose voxel volume equals it (within one
    voxel or 0.5 %)."""
    loaded = label_map(segmentation)
    if loaded is None:
        return {}
    labels, spacing = loaded
    voxel = float(np.prod(spacing))
    values, counts = np.unique(labels[labels > 0], return_counts=True)
    volumes = {int(value): float(count) * voxel for value, count in zip(values, counts)}
    matches = {}
    for compartment, key in COMPARTMENT_KEYS.items():
        expected = float(measured.get(key) or 0.0)
        if expected > 0:
            tolerance = max(voxel, 0.005 * expected)
            matches[compartment] = {label for label, volume in volumes.items() if abs(volume - expected) <= tolerance}
    return matches


def derive_label_mapping(studies: list[Path]) -> tuple[dict[str, int], str]:
    """(compartment -> label, evidence sentence) from every study's measured volumes; CaseFormatError when a
    study's measured volumes match no label, or when the studies disagree."""
    candidates = {compartment: set(DEFAULT_LABELS.values()) for compartment in COMPARTMENT_KEYS}
    checked = 0
    for study in studies:
        measured, segmentation = _measured_volumes(study), _segmentation(study)
        if measured is None or segmentation is None:
            continue
        try:
            matches = matching_labels(measured, segmentation)
        except Exception:  # noqa: BLE001 - an unreadable mask skips its case later; it is no mapping evidence
            continue
        checked += 1
        for compartment, labels in matches.items():
            if not labels & candidates[compartment]:
                raise CaseFormatError(
                    f"{study}: {COMPARTMENT_KEYS[compartment]} = {measured.get(COMPARTMENT_KEYS[compartment])} mm3 "
                    f"in {MEASURED_VOLUMES} matches no label of seg_mask.nii.gz consistent with the other studies "
                    f"(candidates {sorted(candidates[compartment])}); the DeepBraTumIA label mapping is unknown"
                )
            candidates[compartment] &= labels
    if checked == 0:
        return dict(DEFAULT_LABELS), (
            f"no study has {MEASURED_VOLUMES}: default DeepBraTumIA mapping (enhancing core = label 1, as public "
            "analyses of the archive report), not verified on this copy"
        )
    mapping = {}
    for compartment, labels in candidates.items():
        default = DEFAULT_LABELS[compartment]
        mapping[compartment] = next(iter(labels)) if len(labels) == 1 else default
    if len(set(mapping.values())) != len(mapping):
        raise CaseFormatError(f"{MEASURED_VOLUMES} gives no one-to-one DeepBraTumIA label mapping: {candidates}")
    return mapping, f"verified against {MEASURED_VOLUMES} of {checked} studies"


_T2_MENTION = re.compile(r"T2[- ]?Progr", re.IGNORECASE)
_NEGATION = re.compile(r"\b(no|not|without|kein|keine)\b\W*$", re.IGNORECASE)


def t2_progression(rationale: str) -> bool | None:
    """T2/FLAIR progression as the rater wrote it: True when some clause of the rationale names ``T2-Progr``
    without a negation right before it (``"no T2-Progr."``, ``"not T2-Progr"``, ``"without T2 progr"`` say NO),
    False when none does; None when there is no rationale (nothing to score against)."""
    if not rationale.strip():
        return None
    for clause in re.split(r"[,;/+]|\band\b", rationale):
        for mention in _T2_MENTION.finditer(clause):
            if not _NEGATION.search(clause[:mention.start()]):
                return True
    return False


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("x", "yes", "y", "1", "true")


def prepare_lumiere(source: Path, writer: PackageWriter, require_evidence: bool = False,
                    min_label_cases: int = 0, images: str = "atlas") -> None:
    """Cohort filters (MedFlow-Bench: 360 questions -> 139): ``require_evidence`` keeps pairs whose OLD and CURRENT
    segmentations both exist (every lesion field scorable); ``min_label_cases`` drops RANO labels rarer
    than that."""
    ratings = {}
    for row in read_csv_rows(find_one(source, "LUMIERE-ExpertRating*.csv", "expert rating CSV")):
        ratings[(row.get("Patient", ""), row.get("Date", ""))] = row
    imaging = source / "Imaging"
    if not imaging.is_dir():
        imaging = find_one(source, "Patient-*", "patient folder").parent
    patients = {
        patient_dir: sorted((path for path in patient_dir.glob("week-*") if path.is_dir()),
                            key=lambda p: _week_key(p.name))
        for patient_dir in sorted(path for path in imaging.glob("Patient-*") if path.is_dir())
    }
    labels, evidence = derive_label_mapping([study for studies in patients.values() for study in studies])
    writer.notes["segmentation_labels"] = {**labels, "evidence": evidence}
    writer.notes["images"] = images
    rano_labels = {}
    for patient_dir, studies in patients.items():
        for old, current in zip(studies, studies[1:]):
            case_id = f"{patient_dir.name}__{old.name}__to__{current.name}"
            if not writer.admit(case_id):
                continue
            row = ratings.get((patient_dir.name, current.name))
            try:
                if row is None:
                    raise SkipCase("no expert rating for the CURRENT study", "RANO-rated CURRENT study")
                label = _prepare_case(case_id, old, current, row, writer, labels, require_evidence, images)
                if label is not None:
                    rano_labels[case_id] = label
            except SkipCase as reason:
                writer.skip(case_id, reason)
    if min_label_cases:
        drop_rare_labels(writer, rano_labels, min_label_cases)


def drop_rare_labels(writer: PackageWriter, rano_labels: dict[str, str], min_cases: int) -> None:
    """The label-frequency filter: RANO labels with fewer than ``min_cases`` cases are dropped."""
    from collections import Counter

    counts = Counter(rano_labels.values())
    for case_id, label in sorted(rano_labels.items()):
        if counts[label] < min_cases:
            writer.skip(case_id, f"RANO label {label} has {counts[label]} cases (< {min_cases})", "label frequency")


def _prepare_case(case_id: str, old: Path, current: Path, row: dict, writer: PackageWriter, labels: dict,
                  require_evidence: bool, images: str = "atlas") -> str | None:
    raw_rating = column(row, "rating (") or ""
    label = normalize_rano(raw_rating)
    if label is None:
        raise SkipCase(f"rating {raw_rating!r} is not a RANO response label", "RANO-rated CURRENT study")
    segmentations = {"old_seg.nii.gz": _segmentation(old), "current_seg.nii.gz": _segmentation(current)}
    if require_evidence and None in segmentations.values():
        raise SkipCase("a DeepBraTumIA segmentation is missing: lesion fields not scorable", EVIDENCE_STEP)
    found = _pair_images(old, current, images)
    for files in found.values():
        for path in files.values():
            decoded_nifti_shape(path)
    data_dir = writer.data_dir(case_id)
    volumes = []
    for role, files in found.items():
        for modality, path in files.items():
            target = place_file(path, data_dir / f"{role}_{modality}.nii.gz")
            volumes.append(VolumeRef(f"{role}_{modality}", writer.relative(target), "MR", role))
    rationale = column(row, "rationale") or ""
    hidden = {name: place_file(path, writer.hidden_dir(case_id) / name)
              for name, path in segmentations.items() if path is not None}
    try:
        lesions = lesion_fields_of_files(hidden.get("old_seg.nii.gz"), hidden.get("current_seg.nii.gz"),
                                         labels["enhancing"])
    except Exception as error:  # nibabel and gzip raise EOFError, zlib.error, OSError, ... for broken files
        raise SkipCase(f"unreadable DeepBraTumIA segmentation: {type(error).__name__}: {error}") from error
    fields = {
        "non_measurable_lesion": _truthy(column(row, "nonmeasurable")),
        "t2_progression": t2_progression(rationale),
        **lesions,
    }
    patient = case_id.split("__")[0]
    letter = {text: letter for letter, text in RANO_OPTIONS}[label]
    case = volume_case(case_id, writer, volumes, {
        "patient": patient,
        "old_study": old.name,
        "current_study": current.name,
        "modalities": list(MODALITIES),
    }, image_space=images)
    truth = GroundTruth(
        "lumiere", case_id, {"answer": letter},
        {"answer": label, "rationale": rationale, "segmentation_labels": labels}, evidence_fields=fields,
        image_space=images,
    )
    return label if writer.add(case, truth) else None

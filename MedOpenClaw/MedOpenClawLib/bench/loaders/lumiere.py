"""LUMIERE: ``Imaging/Patient-NNN/week-NNN[-k]/`` + ``LUMIERE-ExpertRating-v202211.csv`` -> lumiere packages.

Cases are consecutive imaged timepoints (OLD, CURRENT) of a patient whose CURRENT rating normalises to a RANO
label (``"Post-Op "``, ``"Pre-Op"`` and mixed ``"Post-Op/PD"`` ratings are not responses). Images come from
``DeepBraTumIA-segmentation/atlas/skull_strip/{ct1,t1,t2,flair}_skull_strip.nii.gz`` (the paper's atlas-space
skull-stripped MRI) when present, else from the native ``{CT1,T1,T2,FLAIR}.nii.gz``.

Evidence fields of the CURRENT study:
- non_measurable_lesion: the CSV's NonMeasurableLesions column (``x``/yes/1 = true, empty/no/0 = false).
- t2_progression: the rating rationale mentions ``T2-Progr``; null when the rationale is empty.
- current/new target and non-target lesions: from the DeepBraTumIA segmentations (labels 1 necrosis,
  2 contrast enhancing, 3 oedema; atlas space, so OLD and CURRENT share a grid). Each connected enhancing
  component of CURRENT is a target lesion when on some axial slice its R and A extents are both >= 10 mm
  (RANO measurability), else non-target; it is new when it does not touch OLD's tumour (any label, dilated
  by one voxel). Null when a segmentation is missing.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..cases import Case, GroundTruth, PackageWriter, VolumeRef, place_file
from ..labels import LUMIERE_EVIDENCE_FIELDS, RANO_OPTIONS, normalize_rano
from .common import SkipCase, column, decoded_nifti_shape, find_one, questions_for, read_csv_rows

MODALITIES = ("CT1", "T1", "T2", "FLAIR")
ENHANCING_LABEL = 2
MEASURABLE_MM = 10.0


def _week_key(name: str) -> tuple[int, int]:
    match = re.fullmatch(r"week-(\d+)(?:-(\d+))?", name)
    return (int(match.group(1)), int(match.group(2) or 0)) if match else (10**9, 0)


def _images(study: Path) -> dict[str, Path] | None:
    atlas = study / "DeepBraTumIA-segmentation" / "atlas" / "skull_strip"
    for candidates in (
        {name: atlas / f"{name.lower()}_skull_strip.nii.gz" for name in MODALITIES},
        {name: study / f"{name}.nii.gz" for name in MODALITIES},
    ):
        if all(path.is_file() for path in candidates.values()):
            return candidates
    return None


def _segmentation(study: Path) -> Path | None:
    path = study / "DeepBraTumIA-segmentation" / "atlas" / "segmentation" / "seg_mask.nii.gz"
    return path if path.is_file() else None


def lesion_fields(old_seg: Path | None, current_seg: Path | None) -> dict[str, bool | None]:
    """The four target/non-target fields of CURRENT from the two segmentations (see module docstring)."""
    import nibabel as nib
    from scipy import ndimage

    if old_seg is None or current_seg is None:
        return dict.fromkeys(LUMIERE_EVIDENCE_FIELDS[2:])
    try:
        old_image, current_image = nib.load(old_seg), nib.load(current_seg)
        old, current = np.asarray(old_image.dataobj), np.asarray(current_image.dataobj)
    except Exception as error:  # nibabel and gzip raise EOFError, zlib.error, OSError, ... for broken files
        raise SkipCase(f"unreadable DeepBraTumIA segmentation: {type(error).__name__}: {error}") from error
    if old.shape != current.shape:
        return dict.fromkeys(LUMIERE_EVIDENCE_FIELDS[2:])
    spacing = np.sqrt((current_image.affine[:3, :3] ** 2).sum(axis=0))
    old_tumour = ndimage.binary_dilation(old > 0)
    components, count = ndimage.label(current == ENHANCING_LABEL)
    fields = dict.fromkeys(LUMIERE_EVIDENCE_FIELDS[2:], False)
    for index, region in enumerate(ndimage.find_objects(components), 1):
        component = components[region] == index
        measurable = False
        for k in range(component.shape[2]):
            indices = np.argwhere(component[:, :, k])
            if len(indices):
                extent = (indices.max(axis=0) - indices.min(axis=0) + 1) * spacing[:2]
                measurable = measurable or bool(min(extent) >= MEASURABLE_MM)
        new = not old_tumour[region][component].any()
        kind = "target" if measurable else "non_target"
        fields[f"current_{kind}_lesion"] = True
        fields[f"new_{kind}_lesion"] = fields[f"new_{kind}_lesion"] or new
    return fields


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("x", "yes", "y", "1", "true")


def prepare_lumiere(source: Path, writer: PackageWriter) -> None:
    ratings = {}
    for row in read_csv_rows(find_one(source, "LUMIERE-ExpertRating*.csv", "expert rating CSV")):
        ratings[(row.get("Patient", ""), row.get("Date", ""))] = row
    imaging = source / "Imaging"
    if not imaging.is_dir():
        imaging = find_one(source, "Patient-*", "patient folder").parent
    for patient_dir in sorted(path for path in imaging.glob("Patient-*") if path.is_dir()):
        studies = sorted(
            (path for path in patient_dir.glob("week-*") if path.is_dir()), key=lambda p: _week_key(p.name)
        )
        for old, current in zip(studies, studies[1:], strict=False):
            case_id = f"{patient_dir.name}__{old.name}__to__{current.name}"
            row = ratings.get((patient_dir.name, current.name))
            try:
                if row is None:
                    raise SkipCase("no expert rating for the CURRENT study")
                _prepare_case(case_id, old, current, row, writer)
            except SkipCase as reason:
                writer.skip(case_id, str(reason))


def _prepare_case(case_id: str, old: Path, current: Path, row: dict, writer: PackageWriter) -> None:
    raw_rating = column(row, "rating (") or ""
    label = normalize_rano(raw_rating)
    if label is None:
        raise SkipCase(f"rating {raw_rating!r} is not a RANO response label")
    images = {"OLD": _images(old), "CURRENT": _images(current)}
    for role, files in images.items():
        if files is None:
            raise SkipCase(f"{role} study {(old if role == 'OLD' else current).name} lacks CT1/T1/T2/FLAIR")
        for path in files.values():
            decoded_nifti_shape(path)
    data_dir = writer.data_dir(case_id)
    volumes = []
    for role, files in images.items():
        for modality, path in files.items():
            target = place_file(path, data_dir / f"{role}_{modality}.nii.gz")
            volumes.append(VolumeRef(f"{role}_{modality}", writer.relative(target), "MR", role))
    rationale = column(row, "rationale") or ""
    fields = {
        "non_measurable_lesion": _truthy(column(row, "nonmeasurable")),
        "t2_progression": bool(re.search(r"T2[- ]?Progr", rationale, re.IGNORECASE)) if rationale else None,
        **lesion_fields(_segmentation(old), _segmentation(current)),
    }
    current_seg = _segmentation(current)
    if current_seg is not None:
        place_file(current_seg, writer.hidden_dir(case_id) / "current_seg.nii.gz")
    patient = case_id.split("__")[0]
    letter = {text: letter for letter, text in RANO_OPTIONS}[label]
    case = Case(
        module="lumiere",
        case_id=case_id,
        data_dir=writer.relative(data_dir),
        open_paths=[writer.relative(data_dir)],
        volumes=volumes,
        questions=questions_for("lumiere"),
        brief={
            "patient": patient,
            "old_study": old.name,
            "current_study": current.name,
            "modalities": list(MODALITIES),
        },
    )
    truth = GroundTruth(
        "lumiere", case_id, {"answer": letter}, {"answer": label, "rationale": rationale}, evidence_fields=fields
    )
    writer.add(case, truth)

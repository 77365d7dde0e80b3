"""UCSF-PDGM: ``UCSF-PDGM-NNNN_nifti/`` folders + ``UCSF-PDGM-metadata_v5.csv`` -> ucsf-pdgm case packages.

The metadata CSV uses 3-digit IDs (``UCSF-PDGM-004``) while folders use 4 digits (``UCSF-PDGM-0004``); IDs are
matched by number. Diagnoses ("Glioblastoma, IDH-wildtype", quoted because of the commas) are mapped onto the
six options of App. H.1 by keyword; "unknown" or unmapped diagnoses skip the case.

Follow-up scans: the v5 CSV also has ``UCSF-PDGM-NNN_FU...`` rows (and their ``..._FU..._nifti`` folders). They
are keyed apart from the baseline row (never overwriting it) and excluded as a cohort-filter step: the module is
MedFlow-Bench's preoperative diagnosis task (495 cases), a post-treatment follow-up is not.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...cases import GroundTruth, VolumeRef
from ...kit.loading import (
    SkipCase,
    column,
    decoded_nifti_shape,
    find_one,
    localization_record,
    read_csv_rows,
    volume_case,
)
from ...package import PackageWriter, place_file
from .labels import UCSF_OPTIONS

SEQUENCES = ("T1", "T1c", "T2", "FLAIR")
DIAGNOSIS_KEYWORDS = (  # checked in order: pilocytic before the generic astrocytoma
    ("E", ("pilocytic",)),
    ("A", ("glioblastoma",)),
    ("D", ("dysembryoplastic", "dnet", "ganglioglioma")),
    ("F", ("neurocytoma", "ependymoma")),
    ("B", ("oligodendroglioma", "astrocytoma")),
    ("C", ("no tumor", "no tumour", "normal")),
)


def diagnosis_option(text: str) -> str | None:
    lowered = text.lower()
    for letter, keywords in DIAGNOSIS_KEYWORDS:
        if any(keyword in lowered for keyword in keywords):
            return letter
    return None


FOLLOW_UP_STEP = "baseline scans only (_FU follow-ups excluded)"


def subject_key(identifier: str) -> tuple[int, str] | None:
    """(subject number, follow-up suffix or "") of a CSV ID or folder name: ``UCSF-PDGM-004`` -> (4, ""),
    ``UCSF-PDGM-0181_FU001d`` -> (181, "_FU001D")."""
    match = re.search(r"UCSF-PDGM-0*(\d+)(_FU\w*)?", identifier, re.IGNORECASE)
    return (int(match.group(1)), (match.group(2) or "").upper()) if match else None


def prepare_ucsf(source: Path, writer: PackageWriter) -> None:
    metadata = {}
    for row in read_csv_rows(find_one(source, "UCSF-PDGM-metadata*.csv", "metadata CSV")):
        key = subject_key(row.get("ID", ""))
        if key is not None:
            metadata[key] = row
    for folder in sorted(path for path in source.rglob("UCSF-PDGM-*_nifti") if path.is_dir()):
        case_id = folder.name[: -len("_nifti")]
        if not writer.admit(case_id):
            continue
        key = subject_key(case_id)
        try:
            if key is not None and key[1]:
                raise SkipCase(f"follow-up scan {key[1].lstrip('_')} (not a preoperative study)", FOLLOW_UP_STEP)
            _prepare_case(case_id, folder, metadata.get(key), writer)
        except SkipCase as reason:
            writer.skip(case_id, reason)


def _prepare_case(case_id: str, folder: Path, row: dict | None, writer: PackageWriter) -> None:

    if row is None:
        raise SkipCase("no row in the metadata CSV")
    diagnosis = column(row, "diagnosis") or ""
    option = diagnosis_option(diagnosis)
    if option is None:
        raise SkipCase(f"diagnosis {diagnosis or 'missing'!r} maps to none of the six options")
    files = {sequence: folder / f"{case_id}_{sequence}.nii.gz" for sequence in SEQUENCES}
    segmentation = folder / f"{case_id}_tumor_segmentation.nii.gz"
    for path in [*files.values(), segmentation]:
        if not path.is_file():
            raise SkipCase(f"missing {path.name}")
    shapes = {path.name: decoded_nifti_shape(path)[:3] for path in [*files.values(), segmentation]}
    if len(set(shapes.values())) != 1:
        raise SkipCase(f"sequences and mask are on different grids: {shapes}")
    data_dir = writer.data_dir(case_id)
    volumes = []
    for sequence, path in files.items():
        target = place_file(path, data_dir / path.name)
        volumes.append(VolumeRef(f"{case_id}_{sequence}", writer.relative(target), "MR", sequence))
    mask = place_file(segmentation, writer.hidden_dir(case_id) / "mask.nii.gz")
    localization = localization_record(mask, f"{case_id}_T1c")
    if localization is None and option != "C":
        raise SkipCase("tumour segmentation is empty for a tumour diagnosis")
    case = volume_case(case_id, writer, volumes,
                       {"csv_id": row.get("ID", ""), "loaded_files": [path.name for path in files.values()]})
    truth = GroundTruth(
        module="ucsf-pdgm",
        case_id=case_id,
        answers={"answer": option},
        labels={"answer": dict(UCSF_OPTIONS)[option], "diagnosis": diagnosis},
        localization=localization,
    )
    writer.add(case, truth)

"""Write synthetic UCSF-PDGM and LUMIERE datasets in their distribution layouts (with their CSV quirks)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from ..loaders.lumiere import COMPARTMENT_KEYS
from ..truth_check import lesion_fields
from .brain import (
    DEEPBRATUMIA_LABELS,
    SEQUENCES,
    Timepoint,
    baseline_timepoint,
    diagnosis_compartments,
    evolve,
    load_template,
    rano_assessment,
    render,
)
from .common import rng_for, write_nifti

# option letter -> "Final pathologic diagnosis (WHO 2021)" text as the metadata CSV spells it
UCSF_DIAGNOSES = {
    "A": "Glioblastoma, IDH-wildtype",
    "B": "Oligodendroglioma, IDH-mutant, 1p/19q-codeleted",
    "C": "No tumor",
    "D": "Ganglioglioma",
    "E": "Pilocytic astrocytoma",
    "F": "Central neurocytoma",
}
UCSF_COLUMNS = [
    "ID",
    "Sex",
    "Age at MRI",
    "WHO CNS Grade",
    "Final pathologic diagnosis (WHO 2021)",
    "MGMT status",
    "1p/19q",
    "IDH",
    "1-dead 0-alive",
    "OS",
    "EOR",
    "BraTS21 ID",
]
LUMIERE_RATING_COLUMN = (
    "Rating (according to RANO, PD: Progressive disease, SD: Stable disease, PR: Partial response, "
    "CR: Complete response, Pre-Op: Pre-Operative, Post-Op: Post-Operative)"
)
LUMIERE_RATIONALE_COLUMN = (
    "Rating rationale (CRET: complete resection of the enhancing tumor, PRET: partial resection of the "
    "enhancing tumor, T2-Progr.: T2-Progression, L: Lesion)"
)
LUMIERE_COLUMNS = [
    "Patient",
    "Date",
    "LessThan3Months",
    "NonMeasurableLesions",
    LUMIERE_RATING_COLUMN,
    LUMIERE_RATIONALE_COLUMN,
]
LUMIERE_FILE_NAMES = {"T1c": "CT1", "T1": "T1", "T2": "T2", "FLAIR": "FLAIR"}
RANO_SEQUENCES = (("SD", "PD"), ("PR", "CR"), ("PD", "PR"), ("SD", "PR"))


def write_ucsf(root: Path, seed: int, cases: int, spacing_mm: int) -> list[str]:
    """``UCSF-PDGM-NNNN_nifti/`` folders plus ``UCSF-PDGM-metadata_v5.csv`` (3-digit IDs, quoted
    diagnoses)."""
    template = load_template(spacing_mm)
    rows, written = [], []
    for index in range(cases):
        option = "ABCDEF"[index % 6]
        number = index + 1
        folder_id = f"UCSF-PDGM-{number:04d}"
        rng = rng_for(seed, "ucsf", number)
        images, labels = render(template, diagnosis_compartments(option, rng), rng)
        folder = root / f"{folder_id}_nifti"
        for sequence in SEQUENCES:
            write_nifti(folder / f"{folder_id}_{sequence}.nii.gz", images[sequence], template.affine)
        write_nifti(folder / f"{folder_id}_tumor_segmentation.nii.gz", labels, template.affine)
        grade = {"A": "4", "B": "2", "C": "unknown", "D": "1", "E": "1", "F": "2"}[option]
        rows.append(
            [
                f"UCSF-PDGM-{number:03d}",
                "MF"[index % 2],
                str(30 + 3 * index),
                grade,
                UCSF_DIAGNOSES[option],
                "unknown",
                "unknown",
                "mutated" if option == "B" else "wildtype",
                "0",
                "unknown",
                "GTR",
                f"BraTS2021_{number:05d}",
            ]
        )
        written.append(folder_id)
    with open(root / "UCSF-PDGM-metadata_v5.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(UCSF_COLUMNS)
        writer.writerows(rows)
    return written


def _write_timepoint(folder: Path, timepoint: Timepoint, template, rng) -> np.ndarray:
    """The study's four sequences, its DeepBraTumIA mask and measured volumes; returns the label map."""
    compartments = [part for lesion in timepoint.lesions for part in lesion.compartments(DEEPBRATUMIA_LABELS)]
    images, labels = render(template, compartments, rng)
    for sequence, file_name in LUMIERE_FILE_NAMES.items():
        write_nifti(folder / f"{file_name}.nii.gz", images[sequence], template.affine)
    segmentation = folder / "DeepBraTumIA-segmentation" / "atlas" / "segmentation"
    write_nifti(segmentation / "seg_mask.nii.gz", labels, template.affine)
    voxel_mm3 = float(abs(np.linalg.det(template.affine[:3, :3])))
    measured = {key: round(float((labels == DEEPBRATUMIA_LABELS[name]).sum()) * voxel_mm3, 3)
                for name, key in COMPARTMENT_KEYS.items()}
    (segmentation / "measured_volumes_in_mm3.json").write_text(json.dumps(measured, indent=4, sort_keys=True))
    return labels


def _rationale(label: str, fields: dict) -> str:
    parts = []
    if fields["t2_progression"]:
        parts.append("T2-Progr.")
    if fields["new_target_lesion"] or fields["new_non_target_lesion"]:
        parts.append("new L")
    if label in ("PR", "PD") and not parts:
        parts.append("L1 size change")
    if label == "CR":
        parts.append("no enhancing L")
    return ", ".join(parts) if parts else "stable L"


def write_lumiere(root: Path, seed: int, cases: int, spacing_mm: int) -> list[str]:
    """``Imaging/Patient-NNN/week-NNN/`` studies with DeepBraTumIA segmentations, and the expert-rating CSV.

    Each patient has a post-operative study (rated ``"Post-Op "`` with the real file's trailing space) and two
    follow-ups whose ratings come from the RANO rules applied to the generated lesions; every patient also has
    a ``Pre-Op`` row without imaging, and patient 2 a ``"Post-Op/PD"`` row, as in the distributed CSV.
    """
    template = load_template(spacing_mm)
    spacing = np.sqrt((template.affine[:3, :3] ** 2).sum(axis=0))
    patients = max(1, (cases + 1) // 2)
    rows, written = [], []
    for number in range(1, patients + 1):
        patient = f"Patient-{number:03d}"
        rng = rng_for(seed, "lumiere", number)
        weeks = ["week-003", "week-012", "week-024"]
        timepoint = baseline_timepoint(weeks[0], rng)
        rows.append([patient, "week-000-1", "", "", "Pre-Op", ""])
        rows.append([patient, weeks[0], "x", "", "Post-Op/PD" if number == 2 else "Post-Op ", "PRET"])
        labels = _write_timepoint(root / "Imaging" / patient / weeks[0], timepoint, template, rng)
        for target, week in zip(RANO_SEQUENCES[(number - 1) % len(RANO_SEQUENCES)], weeks[1:], strict=True):
            following = evolve(timepoint, target, week, rng)
            label, model_fields = rano_assessment(timepoint, following)
            previous, labels = labels, _write_timepoint(root / "Imaging" / patient / week, following, template, rng)
            # the lesion states a rater would read off the drawn masks: the rule the loader and the ground-truth
            # checker apply (the model's nominal diameters can sit a voxel from the 10 mm threshold)
            fields = {**model_fields, **lesion_fields(previous, labels, spacing, DEEPBRATUMIA_LABELS["enhancing"])}
            non_measurable = fields["current_non_target_lesion"]
            rows.append([patient, week, "", "x" if non_measurable else "", label, _rationale(label, fields)])
            written.append(f"{patient}__{timepoint.week}__to__{week}")
            timepoint = following
    with open(root / "LUMIERE-ExpertRating-v202211.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(LUMIERE_COLUMNS)
        writer.writerows(rows)
    return written

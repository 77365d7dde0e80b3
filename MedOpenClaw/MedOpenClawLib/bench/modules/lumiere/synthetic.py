"""Write a synthetic LUMIERE dataset in its distribution layout (with its CSV quirks): patients with OLD and CURRENT
studies, DeepBraTumIA segmentations and skull-stripped scans, and the expert RANO ratings."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from ...synthetic.brain import load_template, native_study, render
from ...synthetic.brain_tumours import treatment_changes, white_matter_hyperintensities
from ...synthetic.common import allocate, rng_for, write_nifti
from ...synthetic.pool import run_jobs
from .lesions import lesion_fields
from .loader import COMPARTMENT_KEYS
from .phantom import DEEPBRATUMIA_LABELS, Timepoint, baseline_timepoint, evolve, rano_assessment

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



# Expert RANO ratings of the LUMIERE follow-ups, approximately: progression is the most frequent rating.
RANO_PRIORS = {"PD": 0.42, "SD": 0.33, "PR": 0.15, "CR": 0.10}



def _write_timepoint(folder: Path, timepoint: Timepoint, template, rng, background: list) -> np.ndarray:
    """Native scans (each study positioned and sampled its own way, with the patient's ``background`` findings
    and the treatment changes of its week), DeepBraTumIA's atlas-space skull-stripped scans (the study on the
    atlas grid, outside the brain and lesion zero), the atlas-space mask and its measured volumes; returns the
    label map."""
    weeks = int(timepoint.week.removeprefix("week-"))
    changes = background + treatment_changes(timepoint.cavity, weeks, rng)
    images, labels = render(template, timepoint.compartments() + changes, rng)
    native, affine = native_study(images, template, rng)
    for sequence, file_name in LUMIERE_FILE_NAMES.items():
        write_nifti(folder / f"{file_name}.nii.gz", native[sequence], affine)
    atlas = folder / "DeepBraTumIA-segmentation" / "atlas"
    brain = template.brain | (labels > 0)
    for sequence, file_name in LUMIERE_FILE_NAMES.items():
        write_nifti(atlas / "skull_strip" / f"{file_name.lower()}_skull_strip.nii.gz",
                    np.where(brain, images[sequence], 0).astype(np.int16), template.affine)
    segmentation = atlas / "segmentation"
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
    if label == "SD" and fields.get("pseudo_progression"):
        parts.append("enhancement increase < 12 weeks after RT (pseudoprogression)")
    if label == "CR":
        parts.append("no enhancing L")
    return ", ".join(parts) if parts else "stable L"



def _write_patient(root: Path, seed: int, number: int, sequence: list[str], spacing_mm: int) -> list[list[str]]:
    """One patient's post-operative study and two follow-ups (a worker-process job); returns the CSV rows."""
    template = load_template(spacing_mm)
    spacing = np.sqrt((template.affine[:3, :3] ** 2).sum(axis=0))
    patient = f"Patient-{number:03d}"
    rng = rng_for(seed, "lumiere", number)
    weeks = ["week-003", "week-012", "week-024"]
    timepoint = baseline_timepoint(weeks[0], rng)
    rows = [[patient, "week-000-1", "", "", "Pre-Op", ""],
            [patient, weeks[0], "x", "", "Post-Op/PD" if number == 2 else "Post-Op ", "PRET"]]
    background = white_matter_hyperintensities(template, rng)
    labels = _write_timepoint(root / "Imaging" / patient / weeks[0], timepoint, template, rng, background)
    for index, (target, week) in enumerate(zip(sequence, weeks[1:])):
        early = index == 0
        following = evolve(timepoint, target, week, rng, within_12_weeks=early)
        label, model_fields = rano_assessment(timepoint, following, within_12_weeks=early)
        model_fields["pseudo_progression"] = label == "SD" and following.spd() >= 1.25 * timepoint.spd() > 0
        previous, labels = labels, _write_timepoint(root / "Imaging" / patient / week, following, template, rng,
                                                    background)
        # the lesion states a rater would read off the drawn masks: the rule the loader and the ground-truth
        # checker apply (the model's nominal diameters can sit a voxel from the 10 mm threshold)
        fields = {**model_fields, **lesion_fields(previous, labels, spacing, DEEPBRATUMIA_LABELS["enhancing"])}
        non_measurable = fields["current_non_target_lesion"]
        rows.append([patient, week, "x" if early else "", "x" if non_measurable else "", label,
                     _rationale(label, fields)])
        timepoint = following
    return rows



def write_lumiere(root: Path, seed: int, cases: int, spacing_mm: int, workers: int = 1) -> list[str]:
    """``Imaging/Patient-NNN/week-NNN/`` native studies with DeepBraTumIA's atlas-space skull-stripped scans and
    segmentations, and the expert-rating CSV.

    Each patient has a post-operative study with a resection cavity (rated ``"Post-Op "`` with the real file's
    trailing space) and two follow-ups whose ratings come from the RANO rules applied to the generated lesions;
    the labels follow :data:`RANO_PRIORS` (a complete response comes last: nothing is left to respond after it).
    The first follow-up is within 12 weeks of treatment, where growth may be pseudo-progression. Every patient
    also has a ``Pre-Op`` row without imaging, and patient 2 a ``"Post-Op/PD"`` row, as in the distributed CSV.
    """
    patients = max(1, (cases + 1) // 2)
    targets = allocate(RANO_PRIORS, 2 * patients, rng_for(seed, "lumiere-ratings"))
    jobs = [(root, seed, number, sorted(targets[2 * number - 2: 2 * number], key=lambda label: label == "CR"),
             spacing_mm) for number in range(1, patients + 1)]
    rows = [row for patient_rows in run_jobs(_write_patient, jobs, workers) for row in patient_rows]
    written = [f"Patient-{number:03d}__{old}__to__{new}" for number in range(1, patients + 1)
               for old, new in (("week-003", "week-012"), ("week-012", "week-024"))]
    with open(root / "LUMIERE-ExpertRating-v202211.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(LUMIERE_COLUMNS)
        writer.writerows(rows)
    return written


def write_synthetic(root: Path, config) -> list[str]:
    """This module's share of the embedded cohort at the sizes of ``config`` (a ``synthetic.cohort.CohortConfig``):
    the spec's ``write_synthetic``."""
    return write_lumiere(root, config.seed, config.cases, config.mri_spacing_mm, config.workers)

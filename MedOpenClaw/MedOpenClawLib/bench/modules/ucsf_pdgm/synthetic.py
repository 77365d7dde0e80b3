"""Write a synthetic UCSF-PDGM dataset in its distribution layout (with its CSV quirks)."""

from __future__ import annotations

import csv
from pathlib import Path

from ...synthetic.brain import SEQUENCES, render, sri24_template
from ...synthetic.brain_tumours import diagnosis_compartments, white_matter_hyperintensities
from ...synthetic.common import allocate, rng_for, write_nifti
from ...synthetic.pool import run_jobs

# option letter -> "Final pathologic diagnosis (WHO 2021)" text as the metadata CSV spells it
UCSF_DIAGNOSES = {
    "A": "Glioblastoma, IDH-wildtype",
    "B": "Oligodendroglioma, IDH-mutant, 1p/19q-codeleted",
    "C": "No tumor",
    "D": "Ganglioglioma",
    "E": "Pilocytic astrocytoma",
    "F": "Central neurocytoma",
}
ASTROCYTOMA = "Astrocytoma, IDH-mutant"
# Diagnoses of the 495 UCSF-PDGM cases (v5), approximately: three in four are glioblastomas.
UCSF_PRIORS = {UCSF_DIAGNOSES["A"]: 0.76, ASTROCYTOMA: 0.15, UCSF_DIAGNOSES["B"]: 0.09}
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
def _write_ucsf_case(root: Path, seed: int, number: int, option: str, subtype: str, spacing_mm: int) -> None:
    """One subject's four sequences and tumour segmentation (a worker-process job), on the real dataset's
    SRI24 grid (240x240x155 mm, LPS-stored axes)."""
    template = sri24_template(spacing_mm)
    folder_id = f"UCSF-PDGM-{number:04d}"
    rng = rng_for(seed, "ucsf", number)
    tumour = diagnosis_compartments(option, rng, subtype)
    images, labels = render(template, tumour + white_matter_hyperintensities(template, rng), rng)
    folder = root / f"{folder_id}_nifti"
    for sequence in SEQUENCES:
        write_nifti(folder / f"{folder_id}_{sequence}.nii.gz", images[sequence], template.affine)
    write_nifti(folder / f"{folder_id}_tumor_segmentation.nii.gz", labels, template.affine)


def write_ucsf(root: Path, seed: int, cases: int, spacing_mm: int, workers: int = 1) -> list[str]:
    """``UCSF-PDGM-NNNN_nifti/`` folders plus ``UCSF-PDGM-metadata_v5.csv`` (3-digit IDs, quoted
    diagnoses); diagnoses follow :data:`UCSF_PRIORS`."""
    rows, written, jobs = [], [], []
    diagnoses = allocate(UCSF_PRIORS, cases, rng_for(seed, "ucsf-diagnoses"))
    for index, diagnosis in enumerate(diagnoses):
        option = "B" if diagnosis == ASTROCYTOMA else next(k for k, text in UCSF_DIAGNOSES.items() if text == diagnosis)
        number = index + 1
        folder_id = f"UCSF-PDGM-{number:04d}"
        subtype = "astrocytoma" if "Astrocytoma" in diagnosis else "oligodendroglioma" if "Oligo" in diagnosis else ""
        jobs.append((root, seed, number, option, subtype, spacing_mm))
        grade = {"A": "4", "B": "2" if subtype == "oligodendroglioma" else "3", "C": "unknown", "D": "1", "E": "1",
                 "F": "2"}[option]
        rows.append(
            [
                f"UCSF-PDGM-{number:03d}",
                "MF"[index % 2],
                str(30 + 3 * index),
                grade,
                diagnosis,
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
    run_jobs(_write_ucsf_case, jobs, workers)
    with open(root / "UCSF-PDGM-metadata_v5.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(UCSF_COLUMNS)
        writer.writerows(rows)
    return written


def write_synthetic(root: Path, config) -> list[str]:
    """This module's share of the embedded cohort at the sizes of ``config`` (a ``synthetic.cohort.CohortConfig``):
    the spec's ``write_synthetic``."""
    return write_ucsf(root, config.seed, config.cases, config.mri_spacing_mm, config.workers)

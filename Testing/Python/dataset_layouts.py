"""Tiny raw datasets in their real distribution layouts, for loader tests through ``bench prepare``.

- NSCLC Radiogenomics as NBIA downloads it: ``manifest-*/NSCLC Radiogenomics/<subject>/<study>/<series>/1-NNN.dcm``
  (CT and PET written by pydicom, the tumour DICOM SEG by highdicom, through the synthetic cohort's own writers),
  ``metadata.csv`` with NBIA's columns and Windows ``.\\`` paths, and the clinical CSV with its real header
  (``"Histology "`` with a trailing space, a quoted header holding commas, the seven location ticks).
- CAMELYON17 in both published layouts: the challenge's ``training/center_N/`` + ``lesion_annotations/`` +
  ``stage_labels.csv``, and the GigaScience/AWS release's ``images/`` + ``annotations/`` + ``stages.csv``; slides
  are tiled pyramidal TIFFs (tifffile), annotations ASAP XML.
- LUMIERE: ``Imaging/Patient-NNN/week-NNN/`` with the DeepBraTumIA atlas segmentation and its
  ``measured_volumes_in_mm3.json``, and ``LUMIERE-ExpertRating-v202211.csv`` with its real column names.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from MedOpenClawLib.bench.modules.camelyon17.synthetic import asap_xml
from MedOpenClawLib.bench.modules.lumiere.synthetic import LUMIERE_RATING_COLUMN, LUMIERE_RATIONALE_COLUMN
from MedOpenClawLib.bench.modules.nsclc.chest import Grid
from MedOpenClawLib.bench.modules.nsclc.synthetic import METADATA_COLUMNS, _series_datasets, tumour_seg
from MedOpenClawLib.bench.synthetic.common import uid_for, write_nifti
from MedOpenClawLib.bench.synthetic.slide_layout import write_pyramid

SEED = 5


def write_csv(path: Path, rows: list[list[str]], bom: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as handle:
        csv.writer(handle).writerows(rows)


# ------------------------------------------------------------------------------------------------ NSCLC
NSCLC_CLINICAL_HEADER = [
    "Case ID", "Patient affiliation", "Age at Histological Diagnosis", "Weight (lbs)", "Gender", "Ethnicity",
    "Smoking status", "Pack Years", "Quit Smoking Year", "%GG", "Tumor Location (choice=RUL)",
    "Tumor Location (choice=RML)", "Tumor Location (choice=RLL)", "Tumor Location (choice=LUL)",
    "Tumor Location (choice=LLL)", "Tumor Location (choice=L Lingula)", "Tumor Location (choice=Unknown)",
    "Histology ", "Pathological T stage", "Pathological N stage", "Pathological M stage", "Histopathological Grade",
    "Lymphovascular invasion", "Pleural invasion (elastic, visceral, or parietal)", "EGFR mutation status",
    "KRAS mutation status", "ALK translocation status", "Adjuvant Treatment", "Chemotherapy", "Radiation",
    "Recurrence", "Recurrence Location", "Date of Recurrence", "Date of Last Known Alive", "Survival Status",
    "Date of Death", "Time to Death (days)", "CT Date", "Days between CT and surgery", "PET Date",
]
CT_GRID = Grid((-15.0, -15.0, -9.0), 2.0, 3.0, 16, 6)  # 32 x 32 x 18 mm
PET_GRID = Grid((-16.0, -16.0, -12.0), 4.0, 4.0, 8, 6)
LESION = (slice(2, 4), slice(6, 10), slice(6, 10))  # [slice, row, column] of the CT


def nsclc_clinical(case_id: str, lobes=("RUL",), t_stage="T1a", grade="G2 Moderately differentiated",
                   histology="Adenocarcinoma", n_stage="N0") -> dict[str, str]:
    """One clinical CSV row (the header's column -> value); ``lobes`` are the ticked location choices."""
    row = dict.fromkeys(NSCLC_CLINICAL_HEADER, "")
    for choice in ("RUL", "RML", "RLL", "LUL", "LLL", "L Lingula", "Unknown"):
        row[f"Tumor Location (choice={choice})"] = "Checked" if choice in lobes else "Unchecked"
    row.update({"Case ID": case_id, "Patient affiliation": "AMC" if case_id.startswith("AMC") else "Stanford",
                "Age at Histological Diagnosis": "68", "Gender": "Female", "Smoking status": "Former",
                "Histology ": histology, "Pathological T stage": t_stage, "Pathological N stage": n_stage,
                "Pathological M stage": "M0", "Histopathological Grade": grade,
                "Pleural invasion (elastic, visceral, or parietal)": "No", "EGFR mutation status": "Wildtype"})
    return row


def _series(case_id: str, key: str, modality: str, description: str, number: int, study_uid: str, frame_uid: str):
    grid = CT_GRID if modality == "CT" else PET_GRID
    pixels = np.full((grid.slices, grid.size, grid.size), -800 if modality == "CT" else 100, dtype=np.int16)
    if modality == "CT":
        pixels[LESION] = 40
    else:
        pixels = pixels.astype(np.uint16)
    datasets = _series_datasets(SimpleNamespace(case_id=f"{case_id}/{key}"), grid, pixels, modality, description,
                                number, SEED, study_uid, frame_uid)
    for ds in datasets:
        ds.PatientID, ds.PatientName = case_id, case_id + "^"
    return datasets


def write_nbia_nsclc(root: Path, subjects: list[dict]) -> Path:
    """The NBIA tree of ``subjects`` ({case_id, clinical (a row or None), studies: [(date, [(modality,
    description), ...])], seg: True}); the SEG (when ``seg``) references the first study's first CT. Returns the
    dataset root to give ``bench prepare``."""
    manifest = root / "manifest-1622561851074"
    metadata, clinical = [], []
    for subject in subjects:
        case_id = subject["case_id"]
        if subject.get("clinical") is not None:
            clinical.append([subject["clinical"][name] for name in NSCLC_CLINICAL_HEADER])
        first_ct = None
        for index, (date, series) in enumerate(subject["studies"]):
            study_uid, frame_uid = uid_for(SEED, case_id, index, "study"), uid_for(SEED, case_id, index, "frame")
            month, day, year = date.split("-")
            study_folder = f"{date}-NA-PET CT-{10000 + index}"
            written = []
            for number, (modality, description) in enumerate(series, 2):
                written.append((modality, description, number,
                                _series(case_id, f"{index}/{number}", modality, description, number, study_uid,
                                        frame_uid)))
                first_ct = first_ct or (written[-1][3] if modality == "CT" else None)
            if index == 0 and subject.get("seg", True):
                mask = np.zeros((CT_GRID.slices, CT_GRID.size, CT_GRID.size), dtype=bool)
                mask[LESION] = True
                written.append(("SEG", "Segmentation", 1000, [tumour_seg(first_ct, mask, SEED, case_id)]))
            for modality, description, number, datasets in written:
                folder = manifest / "NSCLC Radiogenomics" / case_id / study_folder / f"{number}.000000-{description}"
                folder.mkdir(parents=True, exist_ok=True)
                for slice_number, ds in enumerate(datasets, 1):
                    ds.StudyDate = f"{year}{month}{day}"
                    ds.save_as(folder / f"1-{slice_number:03d}.dcm", enforce_file_format=True)
                row = dict.fromkeys(METADATA_COLUMNS, "")
                row.update({"Series UID": datasets[0].SeriesInstanceUID, "Collection": "NSCLC Radiogenomics",
                            "Subject ID": case_id, "Study UID": study_uid, "Study Description": "PET CT",
                            "Study Date": date, "Series Description": description, "Modality": modality,
                            "Number of Images": str(len(datasets)),
                            "File Location": ".\\" + str(folder.relative_to(manifest)).replace("/", "\\")})
                metadata.append([row[name] for name in METADATA_COLUMNS])
    write_csv(manifest / "metadata.csv", [METADATA_COLUMNS, *metadata])
    write_csv(root / "NSCLCR01Radiogenomic_DATA_LABELS_2018-05-22_1500-shifted.csv", [NSCLC_CLINICAL_HEADER, *clinical])
    return root


# -------------------------------------------------------------------------------------------- CAMELYON17
TUMOUR = [[40.0, 40.0], [200.0, 40.0], [200.0, 200.0], [40.0, 200.0]]
HOLE = [[80.0, 80.0], [160.0, 80.0], [160.0, 160.0], [80.0, 160.0]]


def write_camelyon(root: Path, layout: str, slides: dict[str, tuple[str, list]]) -> Path:
    """``slides``: name -> (stage label, ASAP groups [(PartOfGroup, polygon)], empty for no XML). ``layout``
    ``"challenge"`` (training/center_2 + lesion_annotations + stage_labels.csv) or ``"gigascience"`` (images/ +
    annotations/ + stages.csv with patient, stage, center)."""
    from PIL import Image

    image = Image.new("RGB", (320, 256), (230, 180, 200))
    images, notes = ((root / "training" / "center_2", root / "training" / "lesion_annotations")
                     if layout == "challenge" else (root / "images", root / "annotations"))
    rows = [["patient", "stage"]] if layout == "challenge" else [["patient", "stage", "center"]]
    patients = sorted({name.rsplit("_node_", 1)[0] for name in slides})
    for patient in patients:
        rows.append([f"{patient}.zip", "pN1"] + ([] if layout == "challenge" else ["2"]))
    for name, (stage, groups) in sorted(slides.items()):
        write_pyramid(images / f"{name}.tif", image, mpp=1.0, aperio=False, levels=2)
        if groups:
            notes.mkdir(parents=True, exist_ok=True)
            (notes / f"{name}.xml").write_text(asap_xml(groups))
        rows.append([f"{name}.tif", stage] + ([] if layout == "challenge" else ["2"]))
    write_csv(root / ("training/stage_labels.csv" if layout == "challenge" else "stages.csv"), rows)
    return root


# ----------------------------------------------------------------------------------------------- LUMIERE
LUMIERE_HEADER = ["Patient", "Date", "LessThan3Months", "NonMeasurableLesions", LUMIERE_RATING_COLUMN,
                  LUMIERE_RATIONALE_COLUMN]


def write_lumiere(root: Path, studies: dict[str, np.ndarray], ratings: list[list[str]],
                  spacing_mm: float = 1.0) -> Path:
    """Patient-001's studies (week -> DeepBraTumIA label map: 1 enhancing, 2 necrotic, 3 oedema) with atlas
    skull-stripped images, the segmentation and its measured volumes, and the native scans (each study shifted
    by its own offset: not co-registered); ``ratings`` are CSV rows after the header."""
    affine = np.diag([spacing_mm, spacing_mm, spacing_mm, 1.0])
    for index, (week, labels) in enumerate(studies.items()):
        native = affine.copy()
        native[:3, 3] = (3.0 * index, -2.0 * index, 1.5 * index)
        for name in ("CT1", "T1", "T2", "FLAIR"):
            write_nifti(root / "Imaging" / "Patient-001" / week / f"{name}.nii.gz",
                        (60 + 90 * (labels > 0)).astype(np.int16), native)
        study = root / "Imaging" / "Patient-001" / week / "DeepBraTumIA-segmentation" / "atlas"
        for name in ("ct1", "t1", "t2", "flair"):
            write_nifti(study / "skull_strip" / f"{name}_skull_strip.nii.gz",
                        (50 + 100 * (labels > 0)).astype(np.int16), affine)
        write_nifti(study / "segmentation" / "seg_mask.nii.gz", labels.astype(np.uint8), affine)
        volume = spacing_mm ** 3
        measured = {key: float((labels == label).sum() * volume) for key, label in
                    (("Enhancing_Core", 1), ("Necrotic_NonEnhancing", 2), ("Edema_Compartment", 3))}
        (study / "segmentation" / "measured_volumes_in_mm3.json").write_text(json.dumps(measured))
    write_csv(root / "LUMIERE-ExpertRating-v202211.csv", [LUMIERE_HEADER, *ratings])
    return root

"""Synthetic NSCLC Radiogenomics subjects: a thoracic CT and a PET series (DICOM, LPS), a DICOM SEG of the
primary tumour, the NBIA download tree with ``metadata.csv`` and the clinical CSV.

Anatomy and uptake come from :mod:`.chest`. Clinical labels follow the cohort's frequencies (mostly early-stage
adenocarcinoma, many tumours under 3 cm, upper lobes first); the T stage is read off the rasterised tumour
mask by AJCC 8th edition size cut-offs (T1 <= 3 cm, T2 <= 5 cm, T3 <= 7 cm, T4 > 7 cm), and the N stage
places metastatic hilar (N1) or mediastinal (N2) nodes -- not all of them FDG-avid -- beside benign nodes,
some of them reactive and avid.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...synthetic.common import allocate, rng_for, uid_for
from ...synthetic.pool import run_jobs
from .chest import (
    LOBES,
    Chest,
    Grid,
    Lobulated,
    Part,
    build_chest,
    ct_numbers,
    label_volume,
    lobulated,
    suv_volume,
)

# Frequencies of the clinical labels (NSCLC Radiogenomics, approximately).
LOBE_PRIORS = {"RUL": 0.30, "RML": 0.07, "RLL": 0.20, "LUL": 0.25, "LLL": 0.15, "Lingula": 0.03}
N_PRIORS = {"N0": 0.72, "N1": 0.12, "N2": 0.16}
HISTOLOGY_PRIORS = {0: 0.74, 1: 0.21, 2: 0.05}  # index into HISTOLOGIES
GRADE_PRIORS = {0: 0.17, 1: 0.47, 2: 0.28, 3: 0.04, 4: 0.04}  # index into GRADES
NODE_STATIONS = {  # RAS mm: ipsilateral hilum (N1) and mediastinal stations (N2)
    "hilar_R": (50.0, -4.0, 2.0),
    "hilar_L": (-50.0, -4.0, 2.0),
    "subcarinal": (-2.0, -22.0, 8.0),
    "paratracheal_R": (17.0, -6.0, 55.0),
    "paratracheal_L": (-16.0, -4.0, 50.0),
    "aortopulmonary": (-24.0, 8.0, 38.0),
}
HISTOLOGIES = ("Adenocarcinoma", "Squamous cell carcinoma", "NSCLC NOS (not otherwise specified)")
GRADES = (
    "G1 Well differentiated",
    "G2 Moderately differentiated",
    "G3 Poorly differentiated",
    "Other, Type I: Well to moderately differentiated",
    "Other, Type II: Moderately to poorly differentiated",
)
CLINICAL_COLUMNS = [
    "Case ID",
    "Patient affiliation",
    "Age at Histological Diagnosis",
    "Gender",
    "Tumor Location (choice=RUL)",
    "Tumor Location (choice=RML)",
    "Tumor Location (choice=RLL)",
    "Tumor Location (choice=LUL)",
    "Tumor Location (choice=LLL)",
    "Tumor Location (choice=L Lingula)",
    "Tumor Location (choice=Unknown)",
    "Histology ",
    "Pathological T stage",
    "Pathological N stage",
    "Pathological M stage",
    "Histopathological Grade",
]
LOCATION_COLUMNS = {"RUL": 4, "RML": 5, "RLL": 6, "LUL": 7, "LLL": 8, "Lingula": 9}
METADATA_COLUMNS = [
    "Series UID",
    "Collection",
    "3rd Party Analysis",
    "Data Description URI",
    "Subject ID",
    "Study UID",
    "Study Description",
    "Study Date",
    "Series Description",
    "Manufacturer",
    "Modality",
    "SOP Class Name",
    "SOP Class UID",
    "Number of Images",
    "File Size",
    "File Location",
    "Download Timestamp",
]


@dataclass
class ThoraxSubject:
    case_id: str
    lobe: str
    n_stage: str
    histology: str
    grade: str
    center: tuple[float, float, float]
    target_diameter: float
    parts: list = field(default_factory=list)
    t_stage: str = ""  # measured on the rasterised mask by write_subject


def t_stage_for(diameter_mm: float) -> str:
    """AJCC 8th edition T category by greatest diameter."""
    for limit, stage in ((30.0, "T1"), (50.0, "T2"), (70.0, "T3")):
        if diameter_mm <= limit:
            return stage
    return "T4"


def _tumour_center(chest: Chest, lobe: str, radius: float, pleural: bool, rng) -> tuple[float, float, float]:
    """A point of ``lobe`` where a sphere of ``radius`` lies in the lung (or against the pleura)."""
    cx, cy = chest.cavity
    directions = rng.normal(size=(26, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    best, best_error = None, np.inf
    for _ in range(20):
        points = np.column_stack([rng.uniform(-cx, cx, 4000), rng.uniform(-cy - 5, cy - 5, 4000),
                                  rng.uniform(-120, 160, 4000)]).astype(np.float32)
        ok = chest.lungs(*points.T) & (Chest.lobe(*points.T) == LOBES.index(lobe))
        for point in points[ok][:200]:
            shell = point + directions * radius
            inside = chest.lungs(*shell.T).mean()
            error = abs(inside - (0.7 if pleural else 1.0))
            if error < best_error:
                best, best_error = point, error
            if error < 0.08:
                return tuple(float(v) for v in best)
    if best is None:
        raise ValueError(f"no room for a tumour in the {lobe}")
    return tuple(float(v) for v in best)


def make_subject(case_id: str, seed: int, lobe: str, n_stage: str, histology: str, grade: str) -> ThoraxSubject:
    """Anatomy, primary tumour and nodes of one subject (the tumour's size is drawn, its T stage measured)."""
    rng = rng_for(seed, "nsclc", case_id)
    chest = build_chest(rng)
    adeno = histology == HISTOLOGIES[0]
    diameter = float(np.clip(rng.lognormal(np.log(27.0), 0.45), 9.0, 95.0))  # median ~27 mm, many < 30 mm
    pleural = bool(rng.random() < 0.3)
    center = _tumour_center(chest, lobe, diameter / 2, pleural, rng)
    soft = ("lung", "vessel", "mediastinal_fat", "muscle", "fat", "pulmonary_artery", "bronchus", "airway")
    suv = float(rng.uniform(1.5, 9.0) if adeno else rng.uniform(5.0, 18.0))
    shape = lobulated(center, diameter / 2 / 1.2, rng, roughness=float(rng.uniform(0.15, 0.45)),
                      spicules=int(rng.integers(3, 9)) if rng.random() < (0.45 if adeno else 0.2) else 0)
    parts = list(chest.parts)
    if adeno and rng.random() < 0.25:  # part-solid: a ground-glass rim around the solid core
        halo = Lobulated(shape.center, shape.radius, shape.bumps, shape.weights, [], 1.35)
        parts.append(Part("tumour_ggo", halo, -480.0, 1.0, ("lung", "vessel")))
    parts.append(Part("tumour", shape, float(rng.uniform(25, 45)), suv, soft))
    side = "R" if lobe.startswith("R") else "L"
    malignant = []
    if n_stage in ("N1", "N2"):
        malignant.append(f"hilar_{side}")
    if n_stage == "N2":
        mediastinal = ["subcarinal", f"paratracheal_{side}"] + (["aortopulmonary"] if side == "L" else [])
        malignant += list(rng.choice(mediastinal, size=int(rng.integers(1, len(mediastinal) + 1)), replace=False))
    benign = [name for name in NODE_STATIONS if name not in malignant]
    benign = list(rng.choice(benign, size=min(int(rng.integers(1, 4)), len(benign)), replace=False))
    for station in malignant + benign:
        bad = station in malignant
        size = rng.uniform(10, 22) if bad else rng.uniform(4, 9)
        jitter = rng.normal(0, 4, 3)
        uptake = (rng.uniform(2.5, 10.0) if rng.random() < 0.8 else rng.uniform(1.0, 2.0)) if bad else (
            rng.uniform(2.5, 5.0) if rng.random() < 0.15 else rng.uniform(0.8, 1.8))
        node = lobulated(np.array(NODE_STATIONS[station]) + jitter, size / 2, rng, roughness=0.15)
        parts.append(Part("node", node, 38.0, float(uptake), ("mediastinal_fat", "lung", "vessel")))
    return ThoraxSubject(case_id, lobe, n_stage, histology, grade, center, diameter, parts)


def max_extent_mm(mask: np.ndarray, grid: Grid) -> float:
    """Greatest diameter of a mask (between hull voxel centres, plus one voxel)."""
    from scipy.spatial import ConvexHull, QhullError

    k, j, i = np.nonzero(mask)
    points = np.column_stack([i * grid.spacing, j * grid.spacing, k * grid.slice_spacing])
    try:
        points = points[ConvexHull(points).vertices]
    except (QhullError, ValueError):
        pass
    span = np.sqrt(((points[:, None] - points[None]) ** 2).sum(-1)).max() if len(points) > 1 else 0.0
    return float(span + grid.spacing)


def _series_datasets(
    subject, grid, pixels, modality, description, series_number, seed, study_uid, frame_uid, slope=1.0, intercept=0.0
):
    """The slices of one series: each holds the first's elements but its own UIDs, instance number, position and
    pixels (the same element objects, so that :func:`save_series` encodes them once)."""
    from pydicom import Dataset
    from pydicom.dataset import FileMetaDataset
    from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, PositronEmissionTomographyImageStorage

    sop_class = CTImageStorage if modality == "CT" else PositronEmissionTomographyImageStorage
    series_uid = uid_for(seed, subject.case_id, modality, "series")
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = sop_class
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.SOPClassUID = sop_class
    ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.FrameOfReferenceUID = study_uid, series_uid, frame_uid
    ds.PatientID = subject.case_id
    ds.PatientName = subject.case_id + "^"
    ds.PatientBirthDate, ds.PatientSex = "", "O"
    ds.StudyDate, ds.StudyTime, ds.StudyID, ds.AccessionNumber = "19900906", "120000", "1", ""
    ds.ReferringPhysicianName = ""
    ds.Modality, ds.SeriesDescription, ds.SeriesNumber = modality, description, series_number
    ds.Manufacturer = "MedOpenClaw synthetic"
    ds.ImageType = ["ORIGINAL", "PRIMARY", "AXIAL"]
    ds.PatientPosition = "FFS"
    ds.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
    ds.PixelSpacing = [grid.spacing, grid.spacing]
    ds.SliceThickness = grid.slice_spacing
    ds.Rows = ds.Columns = grid.size
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit = 16, 16, 15
    ds.PixelRepresentation = 1 if modality == "CT" else 0
    ds.RescaleSlope, ds.RescaleIntercept = slope, intercept
    if modality == "PT":
        ds.Units, ds.DecayCorrection, ds.CorrectedImage = "GML", "START", ["ATTN", "DECY"]
        ds.SeriesDate, ds.SeriesTime, ds.AcquisitionDate, ds.AcquisitionTime = (
            "19900906",
            "120000",
            "19900906",
            "120000",
        )
    shared, datasets = ds, []
    for k in range(grid.slices):
        ds = Dataset(dict(shared))
        ds.file_meta = FileMetaDataset(dict(meta))
        ds.file_meta.MediaStorageSOPInstanceUID = uid_for(seed, subject.case_id, modality, k)
        ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID
        ds.InstanceNumber = k + 1
        ds.ImagePositionPatient = [grid.origin_lps[0], grid.origin_lps[1], grid.origin_lps[2] + k * grid.slice_spacing]
        ds.PixelData = pixels[k].tobytes()
        datasets.append(ds)
    return datasets


def save_series(datasets: list, folder: Path) -> None:
    """Write each of ``datasets`` (one series' slices, explicit VR little endian) as ``folder/1-NNN.dcm``, the bytes
    ``ds.save_as(path, enforce_file_format=True)`` writes: preamble, file meta (its group length, the file's own
    elements and those the writer adds), then the elements in tag order, each element object a slice shares with
    the first encoded once for the series, not once per file (pydicom encoded all ~40 in every file: a fifth of
    the NSCLC generator's CPU)."""
    from copy import deepcopy

    from pydicom.dataelem import DataElement
    from pydicom.dataset import validate_file_meta
    from pydicom.filebase import DicomBytesIO
    from pydicom.filewriter import correct_ambiguous_vr, write_data_element
    from pydicom.uid import ExplicitVRLittleEndian

    def encoded(element) -> bytes:
        buffer = DicomBytesIO()
        buffer.is_implicit_VR, buffer.is_little_endian = False, True
        write_data_element(buffer, element)
        return buffer.getvalue()

    first = datasets[0]
    added = deepcopy(first.file_meta)
    validate_file_meta(added, enforce_standard=True)
    added = [added.get_item(tag) for tag in added.keys() if tag not in first.file_meta]
    known = {id(element): encoded(element) for element in added}  # their ids stay theirs: all are held
    for ds in (first, first.file_meta):
        correct_ambiguous_vr(ds, True)  # as the writer does, in place (the pixel data's VR)
        known.update((id(ds.get_item(tag)), encoded(ds.get_item(tag))) for tag in ds.keys())
    for index, ds in enumerate(datasets, 1):
        if (ds.file_meta.TransferSyntaxUID != ExplicitVRLittleEndian or "SpecificCharacterSet" in ds
                or ds.SOPInstanceUID != ds.file_meta.MediaStorageSOPInstanceUID
                or ds.SOPClassUID != ds.file_meta.MediaStorageSOPClassUID or getattr(ds, "preamble", None)):
            raise ValueError("save_series writes the new slices of one explicit VR little endian series")
        correct_ambiguous_vr(ds, True)
        meta = {element.tag: element for element in added}
        meta.update((tag, ds.file_meta.get_item(tag)) for tag in ds.file_meta.keys() if tag != 0x00020000)
        meta_bytes = b"".join(known.get(id(meta[tag])) or encoded(meta[tag]) for tag in sorted(meta))
        body = b"".join(known.get(id(element)) or encoded(element) for element in
                        (ds.get_item(tag) for tag in sorted(ds.keys()) if tag.element or tag.group <= 6))
        (folder / f"1-{index:03d}.dcm").write_bytes(b"\x00" * 128 + b"DICM" + encoded(
            DataElement(0x00020000, "UL", len(meta_bytes))) + meta_bytes + body)


def subject_grids(case_id: str, seed: int, ct_size: int) -> tuple[Grid, Grid]:
    """(CT, PET) grids: CT ``ct_size``² at a field of view of 330-380 mm with 2.5 or 3 mm slices (1.25 or 2.5 mm
    at 512), PET at 4 mm over a wider field; both cover the thorax and upper abdomen."""
    rng = rng_for(seed, "nsclc-grid", case_id)
    spacing = float(rng.uniform(330, 380)) / ct_size
    slice_spacing = float(rng.choice([1.25, 2.5] if ct_size >= 512 else [2.5, 3.0]))
    top, bottom = 185.0, -185.0
    half = spacing * ct_size / 2
    ct = Grid((-half + spacing / 2, -half - 5 + spacing / 2, bottom), spacing, slice_spacing, ct_size,
              int((top - bottom) / slice_spacing))
    pet_spacing = 4.0 * max(1.0, 256 / ct_size)  # coarser only for the tiny test grids
    pet_size = int(np.ceil(400.0 / pet_spacing))
    pet = Grid((-200.0 + pet_spacing / 2, -205.0 + pet_spacing / 2, bottom - 96.0), pet_spacing, pet_spacing,
               pet_size, int((top - bottom + 104.0) / pet_spacing))
    return ct, pet


def write_subject(root: Path, subject: ThoraxSubject, seed: int, study_folder: str,
                  ct_size: int = 256) -> tuple[list[dict], str]:
    """Write CT, PET and SEG series under ``root/<case>/<study_folder>/``; returns (metadata.csv rows, the T
    stage measured on the tumour mask)."""

    rng = rng_for(seed, "nsclc-pixels", subject.case_id)
    ct_grid, pet_grid = subject_grids(subject.case_id, seed, ct_size)
    study_uid = uid_for(seed, subject.case_id, "study")
    frame_uid = uid_for(seed, subject.case_id, "frame")
    labels = label_volume(subject.parts, ct_grid)
    tumour_labels = [i for i, part in enumerate(subject.parts, 1) if part.name.startswith("tumour")]
    tumour = np.isin(labels, tumour_labels)
    if not tumour.any():
        raise ValueError(f"{subject.case_id}: the tumour fell outside the CT field of view")
    t_stage = t_stage_for(max_extent_mm(tumour, ct_grid))
    hu = np.clip(np.round(ct_numbers(subject.parts, labels, ct_grid, rng)), -1024, 3000).astype(np.int16)
    del labels
    suv = suv_volume(subject.parts, pet_grid, rng)
    slope = float(max(suv.max(), 1.0) / 30000.0)
    pet_pixels = np.round(suv / slope).astype(np.uint16)
    series = [
        ("CT", "CT CHEST", 3,
         _series_datasets(subject, ct_grid, hu, "CT", "CT CHEST", 3, seed, study_uid, frame_uid, 1.0, 0.0)),
        ("PT", "PET WB", 4,
         _series_datasets(subject, pet_grid, pet_pixels, "PT", "PET WB", 4, seed, study_uid, frame_uid, slope, 0.0)),
    ]
    seg = tumour_seg(series[0][3], tumour, seed, subject.case_id)
    rows = []
    for modality, description, number, datasets in series + [("SEG", "Segmentation", 1000, [seg])]:
        suffix = int(uid_for(seed, subject.case_id, description)[-5:])
        folder_name = f"{number}.000000-{description}-{suffix:05d}"
        folder = root / subject.case_id / study_folder / folder_name
        folder.mkdir(parents=True, exist_ok=True)
        if modality == "SEG":
            seg.save_as(folder / "1-001.dcm", enforce_file_format=True)
        else:
            save_series(datasets, folder)
        rows.append(
            {
                "modality": modality,
                "description": description,
                "series_uid": datasets[0].SeriesInstanceUID,
                "study_uid": study_uid,
                "folder": folder,
                "count": len(datasets),
            }
        )
    return rows, t_stage


def tumour_seg(source_images: list, mask: np.ndarray, seed: int, case_id: str):
    """The DICOM SEG (highdicom, binary, one "Neoplasm, Primary" segment) of ``mask`` ([slice, row, column]) on
    the CT ``source_images``, with fixed dates and UIDs so the same seed writes the same bytes."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    seg = hd.seg.Segmentation(
        source_images=source_images,
        pixel_array=mask.astype(np.uint8),
        segmentation_type=hd.seg.SegmentationTypeValues.BINARY,
        segment_descriptions=[
            hd.seg.SegmentDescription(
                segment_number=1,
                segment_label="Neoplasm, Primary",
                segmented_property_category=codes.SCT.MorphologicallyAbnormalStructure,
                segmented_property_type=codes.SCT.Neoplasm,
                algorithm_type=hd.seg.SegmentAlgorithmTypeValues.MANUAL,
            )
        ],
        series_instance_uid=uid_for(seed, case_id, "seg-series"),
        series_number=1000,
        sop_instance_uid=uid_for(seed, case_id, "seg"),
        instance_number=1,
        manufacturer="MedOpenClaw synthetic",
        manufacturer_model_name="cohort generator",
        software_versions="1",
        device_serial_number="0",
        series_description="Segmentation",
        omit_empty_frames=False,
    )
    for keyword in ("ContentDate", "SeriesDate", "InstanceCreationDate"):
        if keyword in seg:
            setattr(seg, keyword, "19900906")
    for keyword in ("ContentTime", "SeriesTime", "InstanceCreationTime"):
        if keyword in seg:
            setattr(seg, keyword, "120000")
    _fix_nested_uids(seg, seed, case_id)
    return seg


def _fix_nested_uids(dataset, seed: int, case_id: str) -> None:
    """highdicom draws a random DimensionOrganizationUID and stamps the contribution time; fix both."""
    for item in getattr(dataset, "ContributingEquipmentSequence", []):
        if "ContributionDateTime" in item:
            item.ContributionDateTime = "19900906120000"
    for index, item in enumerate(getattr(dataset, "DimensionOrganizationSequence", [])):
        uid = uid_for(seed, case_id, "dimension-organization", index)
        item.DimensionOrganizationUID = uid
        for dimension in getattr(dataset, "DimensionIndexSequence", []):
            dimension.DimensionOrganizationUID = uid


def subject_attributes(seed: int, count: int) -> list[dict]:
    """Lobe, N stage, histology and grade of ``count`` subjects, each column following its frequencies."""
    columns = {
        "lobe": allocate(LOBE_PRIORS, count, rng_for(seed, "nsclc-lobes")),
        "n_stage": allocate(N_PRIORS, count, rng_for(seed, "nsclc-n")),
        "histology": [HISTOLOGIES[i] for i in allocate(HISTOLOGY_PRIORS, count, rng_for(seed, "nsclc-histology"))],
        "grade": [GRADES[i] for i in allocate(GRADE_PRIORS, count, rng_for(seed, "nsclc-grade"))],
    }
    return [{key: values[index] for key, values in columns.items()} for index in range(count)]


def _write_case(collection: Path, case_id: str, seed: int, attributes: dict, study_folder: str,
                ct_size: int) -> tuple[list[dict], ThoraxSubject]:
    """One subject's series (a worker-process job); returns its metadata rows and the subject with its
    measured T stage."""
    subject = make_subject(case_id, seed, **attributes)
    rows, subject.t_stage = write_subject(collection, subject, seed, study_folder, ct_size)
    subject.parts = []  # shapes are not needed by the caller
    return rows, subject


def write_nsclc(root: Path, seed: int, cases: int, ct_size: int = 256, workers: int = 1) -> list[str]:
    """``manifest-<n>/NSCLC Radiogenomics/R01-NNN/...`` + ``metadata.csv`` + the clinical CSV (one AMC
    case)."""
    manifest = root / "manifest-1622561851074"
    collection = manifest / "NSCLC Radiogenomics"
    metadata_rows, clinical_rows, written = [], [], []
    case_ids = [f"R01-{index + 1:03d}" for index in range(cases)] + ["AMC-001"]
    jobs = [(collection, case_id, seed, attributes, f"09-06-1990-NA-CT CHEST-{index + 10000}", ct_size)
            for index, (case_id, attributes) in enumerate(zip(case_ids, subject_attributes(seed, len(case_ids))))]
    for index, (rows, subject) in enumerate(run_jobs(_write_case, jobs, workers)):
        case_id = subject.case_id
        for row in rows:
            relative = row["folder"].relative_to(manifest).as_posix().replace("/", "\\")
            metadata_rows.append(
                [
                    row["series_uid"],
                    "NSCLC Radiogenomics",
                    "NO",
                    "",
                    case_id,
                    row["study_uid"],
                    "CT CHEST",
                    "09-06-1990",
                    row["description"],
                    "MedOpenClaw synthetic",
                    row["modality"],
                    "",
                    "",
                    str(row["count"]),
                    "",
                    ".\\" + relative,
                    "",
                ]
            )
        location = ["Unchecked"] * 7
        location[LOCATION_COLUMNS[subject.lobe] - 4] = "Checked"
        clinical_rows.append(
            [
                case_id,
                "AMC" if case_id.startswith("AMC") else "Stanford",
                str(60 + index),
                "Male",
                *location,
                subject.histology,
                subject.t_stage + ("a" if subject.t_stage == "T1" else ""),
                subject.n_stage,
                "M0",
                subject.grade,
            ]
        )
        if not case_id.startswith("AMC"):
            written.append(case_id)
    with open(manifest / "metadata.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(METADATA_COLUMNS)
        writer.writerows(metadata_rows)
    with open(
        root / "NSCLCR01Radiogenomic_DATA_LABELS_2018-05-22_1500-shifted.csv", "w", newline="", encoding="utf-8"
    ) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(CLINICAL_COLUMNS)
        writer.writerows(clinical_rows)
    return written


def write_synthetic(root: Path, config) -> list[str]:
    """This module's share of the embedded cohort at the sizes of ``config`` (a ``synthetic.cohort.CohortConfig``):
    the spec's ``write_synthetic``."""
    return write_nsclc(root, config.seed, config.cases, config.ct_size, config.workers)

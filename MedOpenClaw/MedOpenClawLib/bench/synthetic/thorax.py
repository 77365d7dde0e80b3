"""Synthetic NSCLC Radiogenomics subjects: a thoracic CT and a PET series (DICOM, LPS), a DICOM SEG of the
primary
tumour, the NBIA download tree with ``metadata.csv`` and the clinical CSV.

Anatomy is geometric: a body ellipse, two lungs split into lobes by planes (right: upper / middle / lower,
left: upper / lingula / lower), mediastinum and spine. The primary tumour is a sphere in the named lobe whose
diameter sets the T stage by AJCC 8th edition size cut-offs (T1 <= 3 cm, T2 > 3-5 cm, T3 > 5-7 cm, T4 > 7 cm);
N1 adds an enlarged ipsilateral hilar node, N2 a subcarinal/mediastinal node (both FDG-avid on PET).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .common import rng_for, uid_for

LOBE_CENTERS = {  # RAS mm of a point well inside each lobe (lungs centred at R = +-90, A = 0)
    "RUL": (85.0, 10.0, 40.0),
    "RML": (70.0, 35.0, -5.0),
    "RLL": (90.0, -30.0, -35.0),
    "LUL": (-85.0, 5.0, 40.0),
    "Lingula": (-70.0, 35.0, -5.0),
    "LLL": (-90.0, -30.0, -35.0),
}
T_STAGE_DIAMETER_MM = {"T1": 24.0, "T2": 40.0, "T3": 56.0, "T4": 72.0}
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


@dataclass(frozen=True)
class Grid:
    """An axial DICOM grid: LPS origin of the first voxel, pixel spacing (mm), slice spacing and counts."""

    origin_lps: tuple[float, float, float]
    spacing: float
    slice_spacing: float
    size: int
    slices: int

    def ras_points(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """RAS coordinates of voxel centres, arrays indexed [slice, row, column] like the stored frames."""
        k, j, i = np.indices((self.slices, self.size, self.size), dtype=np.float32)
        x = self.origin_lps[0] + i * self.spacing  # L
        y = self.origin_lps[1] + j * self.spacing  # P
        z = self.origin_lps[2] + k * self.slice_spacing  # S
        return -x, -y, z


@dataclass
class ThoraxSubject:
    case_id: str
    lobe: str
    t_stage: str
    n_stage: str
    histology: str
    grade: str
    center: tuple[float, float, float]
    diameter: float


def make_subject(case_id: str, index: int, seed: int) -> ThoraxSubject:
    rng = rng_for(seed, "nsclc", case_id)
    lobe = list(LOBE_CENTERS)[index % 6]
    t_stage = ("T1", "T2", "T1", "T3", "T2", "T1")[index % 6]
    n_stage = ("N0", "N1", "N2", "N0", "N0", "N1")[index % 6]
    center = tuple(float(value + rng.uniform(-4, 4)) for value in LOBE_CENTERS[lobe])
    # a T3 tumour does not fit the small lobes of this phantom; keep its centre inside the lung anyway
    return ThoraxSubject(
        case_id,
        lobe,
        t_stage,
        n_stage,
        HISTOLOGIES[index % 3],
        GRADES[index % 5],
        center,
        T_STAGE_DIAMETER_MM[t_stage] * float(rng.uniform(0.95, 1.02)),
    )


def _ellipsoid(points, center, radii):
    r, a, s = points
    return ((r - center[0]) / radii[0]) ** 2 + ((a - center[1]) / radii[1]) ** 2 + ((s - center[2]) / radii[2]) ** 2


def _nodes(subject: ThoraxSubject) -> list[tuple[tuple[float, float, float], float]]:
    side = 1.0 if subject.lobe.startswith("R") else -1.0
    nodes = []
    if subject.n_stage in ("N1", "N2"):
        nodes.append(((side * 45.0, 5.0, 5.0), 8.0))  # ipsilateral hilar
    if subject.n_stage == "N2":
        nodes.append(((0.0, -5.0, -12.0), 9.0))  # subcarinal
    return nodes


def ct_volume(subject: ThoraxSubject, grid: Grid, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(HU int16 [slice,row,col], tumour mask bool) on ``grid``."""
    points = grid.ras_points()
    hu = np.full(points[0].shape, -1000.0, dtype=np.float32)
    hu[_ellipsoid(points, (0, 0, 0), (160, 110, 400)) <= 1] = 40.0
    lungs = (_ellipsoid(points, (90, 0, 0), (60, 75, 95)) <= 1) | (_ellipsoid(points, (-90, 0, 0), (60, 75, 95)) <= 1)
    hu[lungs] = -850.0
    hu[_ellipsoid(points, (0, 10, 0), (28, 40, 120)) <= 1] = 45.0  # mediastinum
    hu[_ellipsoid(points, (0, -85, 0), (18, 18, 400)) <= 1] = 700.0  # spine
    tumour = _ellipsoid(points, subject.center, (subject.diameter / 2,) * 3) <= 1
    hu[tumour] = 35.0
    for center, radius in _nodes(subject):
        hu[_ellipsoid(points, center, (radius,) * 3) <= 1] = 50.0
    hu += rng.normal(0, 12, hu.shape)
    return np.clip(hu, -1024, 3000).astype(np.int16), tumour


def pet_volume(subject: ThoraxSubject, grid: Grid, rng: np.random.Generator) -> np.ndarray:
    """SUV-like float volume: body background ~1, tumour ~9, nodes ~5."""
    points = grid.ras_points()
    suv = np.where(_ellipsoid(points, (0, 0, 0), (160, 110, 400)) <= 1, 1.0, 0.05).astype(np.float32)
    suv[_ellipsoid(points, (0, 10, 0), (28, 40, 120)) <= 1] = 2.0
    suv[_ellipsoid(points, subject.center, (subject.diameter / 2,) * 3) <= 1] = 9.0
    for center, radius in _nodes(subject):
        suv[_ellipsoid(points, center, (radius,) * 3) <= 1] = 5.0
    return np.clip(suv + rng.normal(0, 0.1, suv.shape), 0, None)


def _series_datasets(
    subject, grid, pixels, modality, description, series_number, seed, study_uid, frame_uid, slope=1.0, intercept=0.0
):
    from pydicom import Dataset
    from pydicom.dataset import FileMetaDataset
    from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, PositronEmissionTomographyImageStorage

    sop_class = CTImageStorage if modality == "CT" else PositronEmissionTomographyImageStorage
    series_uid = uid_for(seed, subject.case_id, modality, "series")
    datasets = []
    for k in range(grid.slices):
        ds = Dataset()
        ds.file_meta = FileMetaDataset()
        ds.file_meta.MediaStorageSOPClassUID = sop_class
        ds.file_meta.MediaStorageSOPInstanceUID = uid_for(seed, subject.case_id, modality, k)
        ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds.SOPClassUID = sop_class
        ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID
        ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.FrameOfReferenceUID = study_uid, series_uid, frame_uid
        ds.PatientID = subject.case_id
        ds.PatientName = subject.case_id + "^"
        ds.PatientBirthDate, ds.PatientSex = "", "O"
        ds.StudyDate, ds.StudyTime, ds.StudyID, ds.AccessionNumber = "19900906", "120000", "1", ""
        ds.ReferringPhysicianName = ""
        ds.Modality, ds.SeriesDescription, ds.SeriesNumber, ds.InstanceNumber = (
            modality,
            description,
            series_number,
            k + 1,
        )
        ds.Manufacturer = "MedOpenClaw synthetic"
        ds.ImageType = ["ORIGINAL", "PRIMARY", "AXIAL"]
        ds.PatientPosition = "FFS"
        ds.ImagePositionPatient = [grid.origin_lps[0], grid.origin_lps[1], grid.origin_lps[2] + k * grid.slice_spacing]
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
        ds.PixelData = pixels[k].tobytes()
        datasets.append(ds)
    return datasets


def write_subject(root: Path, subject: ThoraxSubject, seed: int, study_folder: str) -> list[dict]:
    """Write CT, PET and SEG series under ``root/<case>/<study_folder>/``; returns metadata.csv rows."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    rng = rng_for(seed, "nsclc-pixels", subject.case_id)
    ct_grid = Grid((-170.0, -130.0, -110.0), 3.5, 5.0, 96, 44)
    pet_grid = Grid((-170.0, -130.0, -110.0), 7.0, 7.0, 48, 32)
    study_uid = uid_for(seed, subject.case_id, "study")
    frame_uid = uid_for(seed, subject.case_id, "frame")
    hu, tumour = ct_volume(subject, ct_grid, rng)
    suv = pet_volume(subject, pet_grid, rng)
    slope = float(max(suv.max(), 1.0) / 30000.0)
    pet_pixels = np.round(suv / slope).astype(np.uint16)
    series = [
        (
            "CT",
            "CT CHEST",
            3,
            _series_datasets(subject, ct_grid, hu, "CT", "CT CHEST", 3, seed, study_uid, frame_uid, 1.0, 0.0),
        ),
        (
            "PT",
            "PET WB",
            4,
            _series_datasets(subject, pet_grid, pet_pixels, "PT", "PET WB", 4, seed, study_uid, frame_uid, slope, 0.0),
        ),
    ]
    seg = hd.seg.Segmentation(
        source_images=series[0][3],
        pixel_array=tumour.astype(np.uint8),
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
        series_instance_uid=uid_for(seed, subject.case_id, "seg-series"),
        series_number=1000,
        sop_instance_uid=uid_for(seed, subject.case_id, "seg"),
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
    _fix_nested_uids(seg, seed, subject.case_id)
    rows = []
    for modality, description, number, datasets in series + [("SEG", "Segmentation", 1000, [seg])]:
        suffix = int(uid_for(seed, subject.case_id, description)[-5:])
        folder_name = f"{number}.000000-{description}-{suffix:05d}"
        folder = root / subject.case_id / study_folder / folder_name
        folder.mkdir(parents=True, exist_ok=True)
        for index, ds in enumerate(datasets, 1):
            ds.save_as(folder / f"1-{index:03d}.dcm", enforce_file_format=True)
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
    return rows


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


def write_nsclc(root: Path, seed: int, cases: int) -> list[str]:
    """``manifest-<n>/NSCLC Radiogenomics/R01-NNN/...`` + ``metadata.csv`` + the clinical CSV (one AMC
    case)."""
    manifest = root / "manifest-1622561851074"
    collection = manifest / "NSCLC Radiogenomics"
    metadata_rows, clinical_rows, written = [], [], []
    case_ids = [f"R01-{index + 1:03d}" for index in range(cases)] + ["AMC-001"]
    for index, case_id in enumerate(case_ids):
        subject = make_subject(case_id, index, seed)
        study_folder = f"09-06-1990-NA-CT CHEST-{index + 10000}"
        for row in write_subject(collection, subject, seed, study_folder):
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

"""Synthetic volumes for runtime tests: known geometry (oblique, anisotropic, LPS-stored) and a bright
box lesion at a known voxel range, written as NIfTI, NRRD and a DICOM series."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
from pydicom.dataset import FileDataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, generate_uid

SHAPE_IJK = (48, 40, 24)
LESION_IJK = (slice(20, 28), slice(14, 22), slice(10, 14))


def rotation(degrees_z: float, degrees_x: float) -> np.ndarray:
    z, x = np.radians(degrees_z), np.radians(degrees_x)
    rz = np.array([[np.cos(z), -np.sin(z), 0], [np.sin(z), np.cos(z), 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, np.cos(x), -np.sin(x)], [0, np.sin(x), np.cos(x)]])
    return rz @ rx


def oblique_lps_affine() -> np.ndarray:
    """IJK -> RAS of an LPS-stored (i toward L, j toward P), tilted, anisotropic volume."""
    direction_lps = rotation(12.0, 8.0)
    spacing = np.array([0.9, 1.1, 3.0])
    ijk_to_lps = np.eye(4)
    ijk_to_lps[:3, :3] = direction_lps @ np.diag(spacing)
    ijk_to_lps[:3, 3] = [-20.0, -15.0, -30.0]
    return np.diag([-1.0, -1.0, 1.0, 1.0]) @ ijk_to_lps


def phantom(seed: int = 0) -> np.ndarray:
    """(i, j, k) int16 array: noisy background with a bright box lesion."""
    rng = np.random.default_rng(seed)
    array = (rng.normal(100, 10, SHAPE_IJK)).astype(np.int16)
    array[LESION_IJK] = 900
    return array


def write_nifti(path: Path, array_ijk: np.ndarray, affine: np.ndarray) -> Path:
    nib.save(nib.Nifti1Image(array_ijk, affine), str(path))
    return path


def write_dicom_series(folder: Path, array_ijk: np.ndarray, ijk_to_ras: np.ndarray, modality: str = "CT",
                       description: str = "CT_SERIES", slopes: list[float] | None = None) -> Path:
    """One file per k slice, geometry from ``ijk_to_ras`` (converted to DICOM's LPS). With ``slopes`` each
    slice stores round(value / slope) with its own RescaleSlope, as PET scanners do."""
    folder.mkdir(parents=True, exist_ok=True)
    ijk_to_lps = np.diag([-1.0, -1.0, 1.0, 1.0]) @ ijk_to_ras
    spacing = np.linalg.norm(ijk_to_lps[:3, :3], axis=0)
    row_direction, column_direction = ijk_to_lps[:3, 0] / spacing[0], ijk_to_lps[:3, 1] / spacing[1]
    study, series, frame = generate_uid(), generate_uid(), generate_uid()
    for k in range(array_ijk.shape[2]):
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.2"
        meta.MediaStorageSOPInstanceUID = generate_uid()
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds = FileDataset(str(folder / f"{k:04d}.dcm"), {}, file_meta=meta, preamble=b"\0" * 128)
        ds.SOPClassUID = meta.MediaStorageSOPClassUID
        ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
        ds.PatientID, ds.PatientName, ds.Modality = "PHANTOM", "Phantom^Test", modality
        ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.FrameOfReferenceUID = study, series, frame
        ds.SeriesDescription, ds.SeriesNumber, ds.InstanceNumber = description, 1, k + 1
        ds.ImageOrientationPatient = [*row_direction.round(6).tolist(), *column_direction.round(6).tolist()]
        ds.ImagePositionPatient = (ijk_to_lps @ np.array([0, 0, k, 1.0]))[:3].round(6).tolist()
        ds.PixelSpacing = [float(spacing[1]), float(spacing[0])]  # row spacing (j), column spacing (i)
        ds.SliceThickness = float(spacing[2])
        ds.Rows, ds.Columns = array_ijk.shape[1], array_ijk.shape[0]
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
        slope = 1.0 if slopes is None else slopes[k]
        ds.RescaleSlope, ds.RescaleIntercept = f"{slope:.6g}", 0
        stored = np.rint(array_ijk[:, :, k].T / slope).astype(np.int16)
        ds.PixelData = np.ascontiguousarray(stored).tobytes()
        ds.save_as(folder / f"{k:04d}.dcm", enforce_file_format=True)
    return folder


def lesion_center_ras(affine: np.ndarray) -> np.ndarray:
    center_ijk = [(s.start + s.stop - 1) / 2.0 for s in LESION_IJK]
    return (affine @ np.array([*center_ijk, 1.0]))[:3]


def call_ok(registry, name, **arguments):
    """Call an action that must succeed; returns its Result."""
    result = registry.call(name, arguments)
    assert result.ok, result.error
    return result


def call_error(registry, name, code, **arguments):
    """Call an action that must fail with ``code`` and leave the session state exactly as it was."""
    before = registry.context.state()
    result = registry.call(name, arguments)
    assert not result.ok and result.error["code"] == code, result.error
    assert registry.context.state() == before, "a failed action changed the session state"
    return result

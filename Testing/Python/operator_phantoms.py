"""Synthetic data for the operator tests: analytic phantoms (so a known transform needs no resampling),
a lesion in noise, and a small CT DICOM series written with pydicom."""

from __future__ import annotations

import datetime

import numpy as np
import pydicom
from pydicom.dataset import FileDataset, FileMetaDataset
from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, generate_uid

from MedOpenClawLib.operators.image import ImageVolume

# (centre RAS mm, semi-axes mm, value): asymmetric so no rotation maps the phantom onto itself
PHANTOM_BLOBS = (
    ((0.0, 0.0, 0.0), (26.0, 20.0, 16.0), 100.0),
    ((9.0, 5.0, 4.0), (7.0, 5.0, 6.0), 260.0),
    ((-10.0, -6.0, 2.0), (4.0, 8.0, 5.0), 40.0),
    ((3.0, -9.0, -7.0), (5.0, 4.0, 3.0), 400.0),
)


def grid(shape_ijk, spacing, origin_centered=True, rotation=None) -> np.ndarray:
    """An IJK->RAS matrix of the given spacing whose lattice is centred on the RAS origin."""
    direction = np.eye(3) if rotation is None else np.asarray(rotation)
    matrix = np.eye(4)
    matrix[:3, :3] = direction * np.asarray(spacing, dtype=float)
    if origin_centered:
        matrix[:3, 3] = -matrix[:3, :3] @ ((np.asarray(shape_ijk) - 1) / 2.0)
    return matrix


def voxel_centres_ras(shape_ijk, ijk_to_ras) -> np.ndarray:
    """RAS of every voxel centre, shape (k, j, i, 3)."""
    i, j, k = shape_ijk
    kk, jj, ii = np.meshgrid(np.arange(k), np.arange(j), np.arange(i), indexing="ij")
    ijk = np.stack([ii, jj, kk, np.ones_like(ii)], axis=-1).astype(float)
    return (ijk @ ijk_to_ras.T)[..., :3]


def phantom_values(points_ras: np.ndarray) -> np.ndarray:
    """Smooth-edged ellipsoids evaluated at RAS points (..., 3)."""
    values = np.zeros(points_ras.shape[:-1], dtype=np.float32)
    for centre, axes, value in PHANTOM_BLOBS:
        radius = np.sqrt((((points_ras - centre) / axes) ** 2).sum(-1))
        values += value / (1.0 + np.exp((radius - 1.0) * 12.0))
    x, y, z = points_ras[..., 0], points_ras[..., 1], points_ras[..., 2]
    texture = np.sin(x / 3.1 + 0.4) * np.cos(y / 4.3) * np.sin(z / 3.7 + 1.1)  # gives MI gradients everywhere
    body_centre, body_axes, _ = PHANTOM_BLOBS[0]
    body_radius = np.sqrt((((points_ras - body_centre) / body_axes) ** 2).sum(-1))
    inside = 1.0 / (1.0 + np.exp((body_radius - 1.0) * 12.0))
    return values + (40.0 * texture * inside).astype(np.float32)


def phantom_volume(shape_ijk=(48, 48, 48), spacing=(1.5, 1.5, 1.5), moving_to_fixed=None) -> ImageVolume:
    """The phantom sampled on a grid; with ``moving_to_fixed`` it is the moving image of that known transform."""
    ijk_to_ras = grid(shape_ijk, spacing)
    points = voxel_centres_ras(shape_ijk, ijk_to_ras)
    if moving_to_fixed is not None:
        points = points @ moving_to_fixed[:3, :3].T + moving_to_fixed[:3, 3]
    return ImageVolume(phantom_values(points), ijk_to_ras)


def rotation_matrix(degrees_xyz) -> np.ndarray:
    ax, ay, az = np.radians(degrees_xyz)
    rx = np.array([[1, 0, 0], [0, np.cos(ax), -np.sin(ax)], [0, np.sin(ax), np.cos(ax)]])
    ry = np.array([[np.cos(ay), 0, np.sin(ay)], [0, 1, 0], [-np.sin(ay), 0, np.cos(ay)]])
    rz = np.array([[np.cos(az), -np.sin(az), 0], [np.sin(az), np.cos(az), 0], [0, 0, 1]])
    return rz @ ry @ rx


def lesion_volume(shape_ijk=(40, 40, 40), spacing=(1.0, 1.0, 2.0), radius_mm=(9.0, 7.0, 8.0), seed=0):
    """A bright ellipsoidal lesion in a noisy background; returns (volume, true mask, lesion centre RAS)."""
    rng = np.random.default_rng(seed)
    ijk_to_ras = grid(shape_ijk, spacing)
    points = voxel_centres_ras(shape_ijk, ijk_to_ras)
    centre = np.array([3.0, -2.0, 4.0])
    mask = ((((points - centre) / radius_mm) ** 2).sum(-1)) <= 1.0
    array = np.where(mask, 120.0, 40.0) + rng.normal(0.0, 8.0, mask.shape)
    return ImageVolume(array.astype(np.float32), ijk_to_ras), mask, centre


def ct_series(shape_ijk=(24, 20, 6), spacing=(1.2, 1.2, 2.5), origin_lps=(-14.0, -11.0, 30.0)):
    """An axial CT series (datasets in slice order) and the volume the viewer would load from it.

    Rows run along -A... in LPS terms: columns along +L (x), rows along +P (y): the usual axial layout.
    """
    columns, rows, slices = shape_ijk
    study, series, frame = generate_uid(), generate_uid(), generate_uid()
    rng = np.random.default_rng(1)
    pixels = rng.integers(-1000, 400, size=(slices, rows, columns)).astype(np.int16)
    datasets = []
    for index in range(slices):
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = CTImageStorage
        meta.MediaStorageSOPInstanceUID = generate_uid()
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds = FileDataset(None, {}, file_meta=meta, preamble=b"\0" * 128)
        ds.SOPClassUID, ds.SOPInstanceUID = CTImageStorage, meta.MediaStorageSOPInstanceUID
        ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.FrameOfReferenceUID = study, series, frame
        ds.Modality, ds.PatientID, ds.PatientName = "CT", "SYNTH-001", "Synthetic^Patient"
        ds.PatientBirthDate, ds.PatientSex = "19700101", "O"
        ds.StudyDate = ds.SeriesDate = datetime.date(2026, 1, 2).strftime("%Y%m%d")
        ds.StudyTime = ds.SeriesTime = "101500"
        ds.StudyID, ds.AccessionNumber, ds.ReferringPhysicianName = "1", "A1", ""
        ds.SeriesNumber, ds.InstanceNumber = 3, index + 1
        ds.Manufacturer = "Synthetic"
        ds.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
        ds.ImagePositionPatient = [origin_lps[0], origin_lps[1], origin_lps[2] + index * spacing[2]]
        ds.PixelSpacing = [spacing[1], spacing[0]]  # row spacing (between rows), column spacing
        ds.SliceThickness = spacing[2]
        ds.Rows, ds.Columns = rows, columns
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
        ds.RescaleIntercept, ds.RescaleSlope = 0, 1
        ds.PixelData = pixels[index].tobytes()
        datasets.append(ds)
    ijk_to_lps = np.eye(4)
    ijk_to_lps[:3, :3] = np.diag(spacing)
    ijk_to_lps[:3, 3] = origin_lps
    volume = ImageVolume(pixels.astype(np.float32), np.diag([-1.0, -1.0, 1.0, 1.0]) @ ijk_to_lps)
    return datasets, volume


def write_series(datasets, directory) -> list:
    paths = []
    for ds in datasets:
        path = directory / f"{ds.InstanceNumber:03d}.dcm"
        pydicom.dcmwrite(path, ds, enforce_file_format=True)
        paths.append(path)
    return paths

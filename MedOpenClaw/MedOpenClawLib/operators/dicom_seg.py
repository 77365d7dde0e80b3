"""DICOM SEG export (referencing the source series) and import, with highdicom.

Export samples the mask at every pixel centre of every source instance, so frames follow the source series
whatever order the viewer's voxel axes have; import maps every SEG voxel back through its own plane
positions. Both refuse when the grids do not coincide voxel for voxel: a SEG is evidence, and a silently
resampled one would not be the mask the agent saw.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass

import highdicom as hd
import numpy as np
from pydicom.dataset import Dataset
from pydicom.sr.codedict import codes

from .image import LPS_FROM_RAS, ImageVolume

GRID_TOLERANCE_VOXELS = 0.01
# Type 2 patient/study attributes a SEG copies from its source: required to be present, allowed to be empty
# (de-identified series often drop them)
TYPE2_SOURCE_ATTRIBUTES = ("PatientName", "PatientID", "PatientBirthDate", "PatientSex", "StudyDate", "StudyTime",
                           "StudyID", "AccessionNumber", "ReferringPhysicianName")
ALGORITHM_TYPES = ("AUTOMATIC", "SEMIAUTOMATIC", "MANUAL")


class DicomSegError(ValueError):
    """The segmentation and the DICOM series (or target volume) do not share one voxel grid, or input is bad."""


@dataclass
class Segment:
    label: str
    mask: np.ndarray  # bool [k, j, i] on the source volume's grid
    algorithm_type: str = "AUTOMATIC"
    algorithm_name: str = "MedOpenClaw"
    algorithm_family: str = "ArtificialIntelligence"  # a keyword of DICOM CID 7162 (e.g. NeighborhoodAnalysis)
    lesion: bool = False


def export_seg(
    segments: Sequence[Segment],
    volume: ImageVolume,
    source_datasets: Sequence[Dataset],
    path: str | os.PathLike,
    series_description: str = "MedOpenClaw segmentation",
    software_version: str = "0.1.0",
) -> Dataset:
    """Write a binary DICOM SEG whose frames reference ``source_datasets`` (the series ``volume`` was loaded from)."""
    if not segments:
        raise DicomSegError("nothing to export: no segments")
    if not source_datasets:
        raise DicomSegError("the source DICOM series is not available for this volume")
    source_datasets = [_with_type2_attributes(dataset) for dataset in source_datasets]
    frames = np.zeros((len(source_datasets), source_datasets[0].Rows, source_datasets[0].Columns, len(segments)), bool)
    for index, dataset in enumerate(source_datasets):
        k, j, i = _volume_indices(volume, _pixel_centres_lps(dataset))
        for number, segment in enumerate(segments):
            if segment.mask.shape != volume.array.shape:
                raise DicomSegError(f"segment {segment.label!r} is not on the source volume's grid")
            frames[index, :, :, number] = segment.mask[k, j, i]
    descriptions = [_description(number + 1, segment, software_version) for number, segment in enumerate(segments)]
    seg = hd.seg.Segmentation(
        source_images=list(source_datasets),
        pixel_array=frames,
        segmentation_type=hd.seg.SegmentationTypeValues.BINARY,
        segment_descriptions=descriptions,
        series_instance_uid=hd.UID(),
        series_number=int(getattr(source_datasets[0], "SeriesNumber", 0) or 0) + 1000,
        sop_instance_uid=hd.UID(),
        instance_number=1,
        manufacturer="MedOpenClaw",
        manufacturer_model_name="MedOpenClaw operators",
        software_versions=software_version,
        device_serial_number="0",
        series_description=series_description,
        omit_empty_frames=False,
    )
    seg.save_as(path)
    return seg


def import_seg(path: str | os.PathLike, volume: ImageVolume) -> list[tuple[str, np.ndarray]]:
    """(label, bool mask on ``volume``'s grid) for each segment of the SEG file at ``path``."""
    seg = hd.seg.segread(path)
    if seg.segmentation_type != hd.seg.SegmentationTypeValues.BINARY:
        raise DicomSegError("only BINARY segmentations are imported")
    result = []
    for number in seg.segment_numbers:
        stored = seg.get_volume(segment_numbers=[number], combine_segments=False, dtype=np.uint8)
        array = stored.array[..., 0] if stored.array.ndim == 4 else stored.array
        indices = np.argwhere(np.ones(array.shape, bool))  # (slice, row, column) of every stored voxel
        lps = np.c_[indices, np.ones(len(indices))] @ np.asarray(stored.affine).T
        k, j, i = _volume_indices(volume, lps[:, :3])
        mask = np.zeros(volume.array.shape, bool)
        mask[k, j, i] = array.reshape(-1) > 0
        result.append((seg.get_segment_description(number).segment_label, mask))
    return result


def _with_type2_attributes(dataset: Dataset) -> Dataset:
    missing = [name for name in TYPE2_SOURCE_ATTRIBUTES if name not in dataset]
    if not missing:
        return dataset
    completed = copy.deepcopy(dataset)
    for name in missing:
        setattr(completed, name, "")
    return completed


def _pixel_centres_lps(dataset: Dataset) -> np.ndarray:
    """LPS of pixel (row, column) centres, shape (rows, columns, 3), per the DICOM image plane module."""
    origin = np.asarray(dataset.ImagePositionPatient, dtype=float)
    orientation = np.asarray(dataset.ImageOrientationPatient, dtype=float)
    row_spacing, column_spacing = (float(value) for value in dataset.PixelSpacing)
    rows, columns = np.meshgrid(np.arange(dataset.Rows), np.arange(dataset.Columns), indexing="ij")
    return (
        origin
        + columns[..., None] * column_spacing * orientation[:3]
        + rows[..., None] * row_spacing * orientation[3:]
    )


def _volume_indices(volume: ImageVolume, points_lps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Integer (k, j, i) of LPS points that must fall on voxel centres of ``volume``."""
    shape = points_lps.shape[:-1]
    flat = points_lps.reshape(-1, 3)
    ras = np.c_[flat, np.ones(len(flat))] @ LPS_FROM_RAS.T
    ijk = volume.ras_to_ijk(ras[:, :3])
    rounded = np.rint(ijk)
    if np.abs(ijk - rounded).max(initial=0.0) > GRID_TOLERANCE_VOXELS or not volume.contains_ijk(rounded).all():
        raise DicomSegError("the DICOM frames and the volume do not share one voxel grid")
    rounded = rounded.astype(int)
    return tuple(rounded[:, axis].reshape(shape) for axis in (2, 1, 0))


def _description(number: int, segment: Segment, software_version: str) -> hd.seg.SegmentDescription:
    if segment.algorithm_type not in ALGORITHM_TYPES:
        raise DicomSegError(f"algorithm_type must be one of {ALGORITHM_TYPES}")
    identification = None
    if segment.algorithm_type != "MANUAL":
        if segment.algorithm_family not in codes.cid7162.dir():
            raise DicomSegError(f"algorithm_family must be a DICOM CID 7162 keyword, not {segment.algorithm_family!r}")
        identification = hd.AlgorithmIdentificationSequence(
            name=segment.algorithm_name,
            family=getattr(codes.cid7162, segment.algorithm_family),
            version=software_version,
        )
    category, kind = (
        (codes.SCT.MorphologicallyAbnormalStructure, codes.SCT.Lesion)
        if segment.lesion
        else (codes.SCT.AnatomicalStructure, codes.SCT.Tissue)
    )
    return hd.seg.SegmentDescription(
        segment_number=number,
        segment_label=segment.label[:64],
        segmented_property_category=category,
        segmented_property_type=kind,
        algorithm_type=segment.algorithm_type,
        algorithm_identification=identification,
    )

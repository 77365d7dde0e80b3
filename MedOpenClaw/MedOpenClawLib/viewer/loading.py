"""Loading volumes into the scene: NIfTI/NRRD through Slicer's own archetype reader, DICOM series through
SimpleITK/GDCM (slice sorting, rescale, oblique orientation) with an explicit LPS -> RAS conversion.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import SimpleITK as sitk
import vtk
from vtk.util import numpy_support

from ..policy import DirectoryScan
from ..result import ActionError

VOLUME_SUFFIXES = (".nii.gz", ".nii", ".nrrd", ".nhdr", ".mha", ".mhd")
LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0, 1.0])
# DICOM attributes kept on the volume node, under Slicer's "DICOM." attribute prefix
DICOM_ATTRIBUTES = {
    "0008|0060": "Modality",
    "0008|103e": "SeriesDescription",
    "0020|000e": "SeriesInstanceUID",
    "0020|000d": "StudyInstanceUID",
    "0020|0052": "FrameOfReferenceUID",
    "0054|1001": "Units",
    "0054|1102": "DecayCorrection",
}


@dataclass(frozen=True)
class VolumeSource:
    """One loadable image: a volume file, or the files of one DICOM series."""

    kind: str  # "file" | "dicom"
    path: Path
    files: tuple[str, ...] = ()
    series_uid: str = ""

    @property
    def stem(self) -> str:
        if self.kind == "dicom":
            return self.path.name
        name = self.path.name
        for suffix in VOLUME_SUFFIXES:
            if name.lower().endswith(suffix):
                return name[: -len(suffix)]
        return name


def is_volume_file(path: Path) -> bool:
    return path.is_file() and path.name.lower().endswith(VOLUME_SUFFIXES)


def discover_sources(path: Path, scan: Callable[[Path], DirectoryScan]) -> tuple[list[VolumeSource], int]:
    """Every volume under ``path`` and how many scanned entries were skipped: the file itself, or each volume
    file and DICOM series below a directory. ``scan`` is the data-root policy's confined directory scan, so
    nothing found through a link that leads outside the roots is ever read."""
    if path.is_file():
        if not is_volume_file(path):
            raise ActionError("unsupported_format", f"{path.name}: expected NIfTI, NRRD or MetaImage")
        return [VolumeSource("file", path)], 0
    listing = scan(path)
    files_by_directory: dict[Path, list[Path]] = {}
    for file in listing.files:
        files_by_directory.setdefault(file.parent, []).append(file)
    sources: list[VolumeSource] = []
    warnings = sitk.ProcessObject.GetGlobalWarningDisplay()
    sitk.ProcessObject.SetGlobalWarningDisplay(False)  # GDCM warns on every folder without DICOM files
    try:
        for directory in sorted(listing.directories):
            sources.extend(directory_sources(directory, files_by_directory.get(directory, [])))
    finally:
        sitk.ProcessObject.SetGlobalWarningDisplay(warnings)
    if not sources:
        skipped = f" ({listing.skipped} entries outside the data roots or unreadable were skipped)"
        raise ActionError("no_volumes", f"no NIfTI/NRRD file or DICOM series found under {path.name}"
                          + (skipped if listing.skipped else ""))
    return sources, listing.skipped


def directory_sources(directory: Path, allowed: list[Path]) -> list[VolumeSource]:
    """The DICOM series and volume files of one directory, restricted to the ``allowed`` files the scan kept."""
    sources = []
    kept = {str(file) for file in allowed}
    if kept:
        for series_uid in sitk.ImageSeriesReader.GetGDCMSeriesIDs(str(directory)) or ():
            files = [name for name in sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(directory), series_uid)
                     if name in kept]
            if files:
                sources.append(VolumeSource("dicom", directory, tuple(files), series_uid))
    sources.extend(VolumeSource("file", file) for file in sorted(allowed) if is_volume_file(file))
    return sources


def unique_names(sources: list[VolumeSource], taken: set[str], series_names: dict[VolumeSource, str]) -> list[str]:
    """File stems (or series descriptions) as names; clashes are prefixed with the parent folder name."""
    base = [series_names.get(source) or source.stem for source in sources]
    counts = Counter(base)
    names = []
    for source, name in zip(sources, base):
        if counts[name] > 1 or name in taken:
            name = f"{source.path.parent.name}_{name}"
        while name in taken:
            name += "_"
        taken.add(name)
        names.append(name)
    return names


def read_dicom_series(source: VolumeSource) -> tuple[sitk.Image, dict]:
    reader = sitk.ImageSeriesReader()
    reader.SetFileNames(list(source.files))
    # each slice is rescaled with its own slope/intercept (PET slices differ): read as float to keep them exact
    reader.SetOutputPixelType(sitk.sitkFloat32)
    reader.MetaDataDictionaryArrayUpdateOn()
    reader.LoadPrivateTagsOff()
    try:
        image = reader.Execute()
    except RuntimeError as error:
        raise ActionError("unreadable_dicom", f"{source.path}: {error}".splitlines()[0]) from error
    metadata = {}
    for tag, name in DICOM_ATTRIBUTES.items():
        if reader.HasMetaDataKey(0, tag):
            metadata[name] = reader.GetMetaData(0, tag).strip()
    return image, metadata


def series_volume_name(description: str) -> str:
    """The volume name shown for a DICOM series description (``CT CHEST W/CONTRAST`` -> ``CT_CHEST_W_CONTRAST``):
    letters, digits, ``-`` and ``_`` only, so agents can type it and case packages can predict it."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", description.strip()).strip("_")


def series_display_name(source: VolumeSource) -> str:
    """A name for a DICOM series from its description (or modality), read without pixel data."""
    header = sitk.ImageFileReader()
    header.SetFileName(source.files[0])
    header.ReadImageInformation()
    for tag in ("0008|103e", "0008|0060"):
        if header.HasMetaDataKey(tag) and series_volume_name(header.GetMetaData(tag)):
            return series_volume_name(header.GetMetaData(tag))
    return source.path.name


def ijk_to_ras_from_sitk(image: sitk.Image) -> np.ndarray:
    """ITK geometry is LPS; Slicer nodes are RAS."""
    direction = np.array(image.GetDirection(), dtype=float).reshape(3, 3)
    matrix = np.eye(4)
    matrix[:3, :3] = direction @ np.diag(image.GetSpacing())
    matrix[:3, 3] = image.GetOrigin()
    return LPS_TO_RAS @ matrix


def set_node_image(node, array_kji: np.ndarray, ijk_to_ras: np.ndarray) -> None:
    """Put a (k, j, i) numpy array and its IJK->RAS matrix into a scalar volume node."""
    array_kji = np.ascontiguousarray(array_kji)
    image_data = vtk.vtkImageData()
    image_data.SetDimensions(array_kji.shape[2], array_kji.shape[1], array_kji.shape[0])
    scalars = numpy_support.numpy_to_vtk(array_kji.reshape(-1), deep=True)
    image_data.GetPointData().SetScalars(scalars)
    node.SetAndObserveImageData(image_data)
    matrix = vtk.vtkMatrix4x4()
    for row in range(4):
        for column in range(4):
            matrix.SetElement(row, column, float(ijk_to_ras[row, column]))
    node.SetIJKToRASMatrix(matrix)


def load_sources(app, sources: list[VolumeSource]) -> list:
    """Create one scalar volume node per source; on any failure remove what was added and re-raise."""
    scene = app.scene
    taken = {scene.GetNthNodeByClass(i, "vtkMRMLScalarVolumeNode").GetName()
             for i in range(scene.GetNumberOfNodesByClass("vtkMRMLScalarVolumeNode"))}
    series_names = {source: series_display_name(source) for source in sources if source.kind == "dicom"}
    names = unique_names(sources, taken, series_names)
    nodes = []
    try:
        for source, name in zip(sources, names):
            nodes.append(load_file(app, source, name) if source.kind == "file" else load_dicom(app, source, name))
    except BaseException:
        for node in nodes:
            scene.RemoveNode(node)
        raise
    return nodes


def load_file(app, source: VolumeSource, name: str):
    node = app.volumes_logic.AddArchetypeVolume(str(source.path), name)
    if node is None:
        raise ActionError("unreadable_volume", f"Slicer could not read {source.path.name}")
    node.SetAttribute("MedOpenClaw.source", str(source.path))
    return node


def load_dicom(app, source: VolumeSource, name: str):
    image, metadata = read_dicom_series(source)
    array = sitk.GetArrayFromImage(image)
    node = app.scene.AddNewNodeByClass("vtkMRMLScalarVolumeNode", name)
    set_node_image(node, array, ijk_to_ras_from_sitk(image))
    node.CreateDefaultDisplayNodes()
    display = node.GetDisplayNode()
    display.SetAndObserveColorNodeID("vtkMRMLColorTableNodeGrey")
    display.AutoWindowLevelOn()
    for key, value in metadata.items():
        node.SetAttribute(f"DICOM.{key}", value)
    node.SetAttribute("MedOpenClaw.source", str(source.path))
    node.SetAttribute("DICOM.instanceFiles", "|".join(source.files))
    return node

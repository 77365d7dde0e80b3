"""Loading volumes into the scene: NIfTI/NRRD through Slicer's own archetype reader, DICOM series through
SimpleITK/GDCM (series grouping, pixel decoding, rescale), split into the volumes they really hold and given
their geometry by :mod:`.dicom_series`, with an explicit LPS -> RAS conversion.

Warnings are data: what the readers print (VTK output window, ITK on stderr) is captured per source and returned
with every decision that changed what was loaded. A source that cannot be read is left out with its reason as a
warning while the others load; only when nothing loads is the call refused (a 4-D NIfTI, for one, is refused
with Slicer's own reason: it loads only as a sequence, which this viewer does not offer).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import SimpleITK as sitk

# VTK's own modules, not ``import vtk`` (all of VTK: see viewer/geometry.py)
from vtkmodules.util import numpy_support
from vtkmodules.vtkCommonDataModel import vtkImageData
from vtkmodules.vtkCommonMath import vtkMatrix4x4

from ..core.hygiene import preview
from ..core.names import name_problem
from ..core.policy import DataRootPolicy
from ..core.result import ActionError
from .dicom_series import LPS_TO_RAS, VolumePlan, resample_along_normal, split_series
from .native_messages import captured_native_messages

VOLUME_SUFFIXES = (".nii.gz", ".nii", ".nrrd", ".nhdr", ".mha", ".mhd")
# decode ceilings, checked on the header before a voxel is read (a 509 KiB gzip NIfTI can claim 2^29 voxels)
MAX_VOXELS_PER_VOLUME = 2**28  # 512 x 512 x 1024; 1 GiB as float32
MAX_VOXELS_PER_SESSION = 2**29  # every volume loaded at once (open_case keep_loaded adds up)
MAX_VOLUMES_PER_SESSION = 64
HEADER_BYTES = 1 << 16  # NRRD and MetaImage headers are text before the data (or the whole detached header)
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
    plan: VolumePlan | None = field(default=None, compare=False)  # DICOM: slice order and geometry
    voxels: int = field(default=0, compare=False)  # from the header, before decoding

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


@dataclass
class Discovery:
    """What a path holds: loadable sources, scanned entries skipped by the data-root policy, and warnings
    (series split or refused, files that are neither volumes nor DICOM)."""

    sources: list[VolumeSource]
    skipped_entries: int = 0
    warnings: list[str] = field(default_factory=list)
    unsafe_names: list[str] = field(default_factory=list)


def discover_sources(path: Path, roots: DataRootPolicy) -> Discovery:
    """Every volume under ``path``: the file itself, or each volume file and DICOM volume below a directory.
    ``roots`` is the data-root policy: its confined scan finds the files (nothing reached through a link that
    leads outside is read, no unsafe name is kept), and every file a header names is resolved through it too
    (:func:`check_source`). A source that fails its header check is left out with the reason."""
    if path.is_file():
        if not is_volume_file(path):
            raise ActionError("unsupported_format", f"{path.name}: expected NIfTI, NRRD or MetaImage")
        return Discovery([check_source(VolumeSource("file", path), roots)])
    listing = roots.scan(path)
    files_by_directory: dict[Path, list[Path]] = {}
    for file in listing.files:
        files_by_directory.setdefault(file.parent, []).append(file)
    discovery = Discovery([], listing.skipped, unsafe_names=listing.unsafe_names)
    refused: list[str] = []
    warnings = sitk.ProcessObject.GetGlobalWarningDisplay()
    sitk.ProcessObject.SetGlobalWarningDisplay(False)  # GDCM warns on every folder without DICOM files
    try:
        for directory in sorted(listing.directories):
            refused += directory_sources(directory, files_by_directory.get(directory, []), discovery)
        checked = []
        for source in discovery.sources:
            try:
                checked.append(check_source(source, roots))
            except ActionError as error:
                refused.append(error.message)
        discovery.sources = checked
    finally:
        sitk.ProcessObject.SetGlobalWarningDisplay(warnings)
    discovery.warnings += [f"not loaded: {reason}" for reason in refused]
    if not discovery.sources:
        skipped = f" ({listing.skipped} entries outside the data roots or unreadable were skipped)"
        reasons = f": {'; '.join(refused)}" if refused else ""
        raise ActionError("no_volumes", f"no NIfTI/NRRD file or DICOM series found under {path.name}"
                          + (skipped if listing.skipped else "") + reasons)
    return discovery


IGNORED_FILES = ("DICOMDIR", "README", "LICENSE")


def header_fields(path: Path, separator: str) -> dict[str, str]:
    """The ``key<separator>value`` lines of a NRRD (``:``) or MetaImage (``=``) text header, lower-cased keys,
    read from at most :data:`HEADER_BYTES` (the header ends at the first blank line, or at MetaImage's
    ``ElementDataFile``, after which the data may follow)."""
    with open(path, "rb") as handle:
        head = handle.read(HEADER_BYTES)
    fields = {}
    for raw in head.split(b"\n"):
        line = raw.rstrip(b"\r").decode("utf-8", "surrogateescape")
        if not line.strip():
            break
        key, found, value = line.partition(separator)
        if found:
            fields[key.strip().lower()] = value.strip()
        if key.strip().lower() == "elementdatafile":
            break
    return fields


def referenced_data_file(path: Path) -> str | None:
    """The data file a detached header names (NRRD ``data file:``, MetaImage ``ElementDataFile``), or None when
    the data is in the file itself. The multi-file forms (``LIST``, ``%d`` patterns) are refused: each would
    name files no check has seen."""
    name = path.name.lower()
    if name.endswith((".nrrd", ".nhdr")):
        fields = header_fields(path, ":")
        value = fields.get("data file", fields.get("datafile"))
    elif name.endswith((".mha", ".mhd")):
        value = header_fields(path, "=").get("elementdatafile")
        value = None if value == "LOCAL" else value
        if value is None and name.endswith(".mhd"):
            raise ActionError("unsupported_format", f"{path.name}: a MetaImage header without ElementDataFile")
    else:
        return None
    if value is not None and (value.upper().startswith("LIST") or "%" in value or len(value.split()) > 1):
        raise ActionError("unsupported_format", f"{path.name}: multi-file data ({preview(value)}) is not supported; "
                                                "give one data file")
    return value


def check_source(source: VolumeSource, roots: DataRootPolicy) -> VolumeSource:
    """The path resolver for every file a reader will open, and the voxel ceiling, before anything is decoded:
    a detached header's data file must resolve inside the data roots and be a regular file (never
    ``/etc/shadow``, ``../`` or ``/dev/zero``), and the header's size must stay under
    :data:`MAX_VOXELS_PER_VOLUME`. Returns the source with its voxel count."""
    if source.kind == "dicom":
        first, count = Path(source.files[0]), len(source.files)
    else:
        first, count = source.path, 1
        data_file = referenced_data_file(source.path)
        if data_file is not None:
            problem = name_problem(data_file)
            if problem:
                raise ActionError("unsafe_name", f"{source.path.name}: its data file {preview(data_file)} {problem}")
            target = Path(data_file) if Path(data_file).is_absolute() else source.path.parent / data_file
            try:
                real = roots.resolve(str(target))
            except ActionError as error:
                raise ActionError(error.code, f"{source.path.name}: its data file {error.message}") from error
            if not real.is_file():
                raise ActionError("unsupported_format", f"{source.path.name}: its data file is not a regular file")
    reader = sitk.ImageFileReader()
    reader.SetFileName(str(first))
    try:
        reader.ReadImageInformation()
    except RuntimeError as error:
        raise ActionError("unreadable_volume", f"{first.name}: cannot read its header "
                                               f"({str(error).strip().splitlines()[-1][-160:]})") from error
    voxels = int(np.prod([int(size) for size in reader.GetSize()], dtype=object)) * count \
        * max(int(reader.GetNumberOfComponents()), 1)
    if voxels > MAX_VOXELS_PER_VOLUME:
        size = " x ".join(str(value) for value in reader.GetSize())
        raise ActionError("volume_too_large", f"{source.path.name}: its header declares {voxels} voxels ({size}"
                          f"{f' x {count} files' if count > 1 else ''}); at most {MAX_VOXELS_PER_VOLUME} are loaded")
    return VolumeSource(source.kind, source.path, source.files, source.series_uid, source.plan, voxels)


def directory_sources(directory: Path, allowed: list[Path], discovery: Discovery) -> list[str]:
    """Add the DICOM volumes and volume files of one directory (restricted to the ``allowed`` files the scan
    kept) to ``discovery``; returns the reasons of refused DICOM groups."""
    kept = {str(file) for file in allowed}
    used: set[str] = set()
    refused: list[str] = []
    if kept:
        try:
            series = {uid: sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(directory), uid)
                      for uid in sitk.ImageSeriesReader.GetGDCMSeriesIDs(str(directory)) or ()}
        except RuntimeError as error:  # GDCM gives up on a malformed header anywhere in the folder
            series = {}
            refused.append(f"{directory.name}: GDCM cannot scan its DICOM files ({str(error).splitlines()[0][-160:]})")
        for series_uid, names in series.items():
            files = [name for name in names if name in kept]
            used.update(files)
            if files:
                refused += add_series(directory, files, series_uid, discovery)
    volume_files = [file for file in sorted(allowed) if is_volume_file(file)]
    discovery.sources.extend(VolumeSource("file", file) for file in volume_files)
    unknown = [file.name for file in sorted(allowed) if str(file) not in used and file not in volume_files
               and not file.name.startswith(".") and not file.name.upper().startswith(IGNORED_FILES)]
    if unknown:
        discovery.warnings.append(
            f"{len(unknown)} file(s) in {directory.name} could not be read as DICOM images or NIfTI/NRRD volumes "
            f"and were not loaded: {', '.join(unknown[:3])}" + (", ..." if len(unknown) > 3 else ""))
    return refused


def add_series(directory: Path, files: list[str], series_uid: str, discovery: Discovery) -> list[str]:
    """Split one GDCM series into its volumes (:func:`.dicom_series.split_series`) and add them."""
    split = split_series(files, directory.name)
    discovery.warnings += split.warnings
    for plan in split.plans:
        discovery.warnings += plan.warnings
        discovery.sources.append(VolumeSource("dicom", directory, tuple(plan.files), series_uid, plan))
    return split.refused


def unique_names(sources: list[VolumeSource], taken: set[str], series_names: dict[VolumeSource, str]) -> list[str]:
    """File stems (or series descriptions) as names; files whose stems clash are prefixed with their parent
    folder's name, and any name still taken gets ``_2``, ``_3``, ..."""
    base = [series_names.get(source) or source.stem for source in sources]
    counts = Counter(base)
    names = []
    for source, name in zip(sources, base):
        if source.kind == "file" and (counts[name] > 1 or name in taken):
            name = f"{source.path.parent.name}_{name}"
        unique, number = name, 1
        while unique in taken:
            number += 1
            unique = f"{name}_{number}"
        taken.add(unique)
        names.append(unique)
    return names


def read_dicom_series(source: VolumeSource) -> tuple[sitk.Image, dict]:
    """The voxels (float: each slice is rescaled with its own slope/intercept, as PET slices differ) and the
    DICOM attributes kept on the node. One file (a multi-frame image) is read on its own: ITK's series reader
    would add a dimension for it. Anything that is not one 3-D scalar volume is refused with what it is."""
    single = len(source.files) == 1
    reader = sitk.ImageFileReader() if single else sitk.ImageSeriesReader()
    if single:
        reader.SetFileName(source.files[0])
    else:
        reader.SetFileNames(list(source.files))
        reader.MetaDataDictionaryArrayUpdateOn()
    reader.SetOutputPixelType(sitk.sitkFloat32)
    reader.LoadPrivateTagsOff()
    try:
        image = reader.Execute()
    except RuntimeError as error:
        raise ActionError("unreadable_dicom", f"{source.path.name}: {error}".splitlines()[0]) from error
    if image.GetDimension() == 2:
        image = sitk.JoinSeries(image)
    if image.GetDimension() != 3 or image.GetNumberOfComponentsPerPixel() != 1:
        size = " x ".join(str(value) for value in image.GetSize())
        raise ActionError("unsupported_dicom", f"{source.path.name}: a {image.GetDimension()}-D image ({size}) with "
                          f"{image.GetNumberOfComponentsPerPixel()} component(s) per voxel is not one scalar volume")
    metadata = {}
    for tag, name in DICOM_ATTRIBUTES.items():
        present = reader.HasMetaDataKey(tag) if single else reader.HasMetaDataKey(0, tag)
        if present:
            metadata[name] = (reader.GetMetaData(tag) if single else reader.GetMetaData(0, tag)).strip()
    return image, metadata


def series_volume_name(description: str) -> str:
    """The volume name shown for a DICOM series description (``CT CHEST W/CONTRAST`` -> ``CT_CHEST_W_CONTRAST``):
    letters, digits, ``-`` and ``_`` only, so agents can type it and case packages can predict it."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", description.strip()).strip("_")


def series_display_name(source: VolumeSource) -> str:
    """A name for a DICOM volume from its series description (or modality), read without pixel data, plus the
    plane / time point / part suffix when the series holds several volumes (``..._axial``, ``..._t2``)."""
    header = sitk.ImageFileReader()
    header.SetFileName(source.files[0])
    header.ReadImageInformation()
    name = source.path.name
    for tag in ("0008|103e", "0008|0060"):
        if header.HasMetaDataKey(tag) and series_volume_name(header.GetMetaData(tag)):
            name = series_volume_name(header.GetMetaData(tag))
            break
    suffix = source.plan.suffix if source.plan is not None else ""
    return f"{name}_{series_volume_name(suffix)}" if suffix else name


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
    image_data = vtkImageData()
    image_data.SetDimensions(array_kji.shape[2], array_kji.shape[1], array_kji.shape[0])
    scalars = numpy_support.numpy_to_vtk(array_kji.reshape(-1), deep=True)
    image_data.GetPointData().SetScalars(scalars)
    node.SetAndObserveImageData(image_data)
    matrix = vtkMatrix4x4()
    for row in range(4):
        for column in range(4):
            matrix.SetElement(row, column, float(ijk_to_ras[row, column]))
    node.SetIJKToRASMatrix(matrix)


def check_session_size(app, sources: list[VolumeSource], keep_loaded: bool) -> None:
    """Refuse (before decoding) sources that would take the scene past :data:`MAX_VOXELS_PER_SESSION` or
    :data:`MAX_VOLUMES_PER_SESSION`, counting the volumes kept when ``keep_loaded``."""
    scene = app.scene
    kept = [scene.GetNthNodeByClass(i, "vtkMRMLScalarVolumeNode")
            for i in range(scene.GetNumberOfNodesByClass("vtkMRMLScalarVolumeNode"))] if keep_loaded else []
    kept_voxels = sum(node.GetImageData().GetNumberOfPoints() for node in kept if node.GetImageData() is not None)
    voxels = kept_voxels + sum(source.voxels for source in sources)
    if len(kept) + len(sources) > MAX_VOLUMES_PER_SESSION or voxels > MAX_VOXELS_PER_SESSION:
        total = len(kept) + len(sources)
        raise ActionError("session_too_large", f"loading {len(sources)} more volume(s) would hold {total}"
                          f" volumes and {voxels} voxels (at most {MAX_VOLUMES_PER_SESSION} and "
                          f"{MAX_VOXELS_PER_SESSION}); open the case without keep_loaded")


def load_sources(app, sources: list[VolumeSource], avoid_names: bool = True) -> tuple[list, list[str]]:
    """One scalar volume node per source, and the warnings of loading them. A source that cannot be read is
    left out with its reason as a warning; if none loads, the first reason is raised. On an unexpected error
    everything added is removed again. ``avoid_names``: keep new names apart from volumes already loaded
    (False when those are about to be removed)."""
    scene = app.scene
    taken = {scene.GetNthNodeByClass(i, "vtkMRMLScalarVolumeNode").GetName()
             for i in range(scene.GetNumberOfNodesByClass("vtkMRMLScalarVolumeNode"))} if avoid_names else set()
    series_names = {source: series_display_name(source) for source in sources if source.kind == "dicom"}
    names = unique_names(sources, taken, series_names)
    nodes, warnings, failures = [], [], []
    try:
        for source, name in zip(sources, names):
            try:
                node, messages = load_source(app, source, name)
            except ActionError as error:
                failures.append(error)
                warnings.append(f"not loaded: {error.message}")
                continue
            nodes.append(node)
            warnings += [f"{name}: {message}" for message in messages]
    except BaseException:
        for node in nodes:
            scene.RemoveNode(node)
        raise
    if failures and not nodes:
        raise failures[0]
    return nodes, warnings


def load_source(app, source: VolumeSource, name: str) -> tuple[object, list[str]]:
    """(node, what the readers printed) for one source."""
    failure = None
    with captured_native_messages() as messages:
        try:
            node = load_file(app, source, name) if source.kind == "file" else load_dicom(app, source, name)
        except ActionError as error:
            failure = error
    if failure is not None:  # the readers' own words say why (e.g. "contains a 4D image ... as a sequence")
        failure.message = "; ".join([failure.message, *messages[:2]])
        raise failure
    return node, messages


def load_file(app, source: VolumeSource, name: str):
    node = app.volumes_logic.AddArchetypeVolume(str(source.path), name)
    if node is None:
        raise ActionError("unreadable_volume", f"Slicer could not read {source.path.name}")
    node.SetAttribute("MedOpenClaw.source", str(source.path))
    return node


def apply_plan(image: sitk.Image, plan: VolumePlan) -> tuple[np.ndarray, np.ndarray]:
    """(voxels k, j, i; IJK->RAS) with the plan's geometry, resampled onto its even grid when it has one."""
    array = sitk.GetArrayFromImage(image)
    if not plan.has_geometry:
        return array, ijk_to_ras_from_sitk(image)
    if plan.resample_to is not None:
        array = resample_along_normal(array, plan.positions_mm, plan.resample_to)
    return array, plan.ijk_to_ras()


def load_dicom(app, source: VolumeSource, name: str):
    image, metadata = read_dicom_series(source)
    if source.plan is not None:
        array, ijk_to_ras = apply_plan(image, source.plan)
    else:
        array, ijk_to_ras = sitk.GetArrayFromImage(image), ijk_to_ras_from_sitk(image)
    node = app.scene.AddNewNodeByClass("vtkMRMLScalarVolumeNode", name)
    set_node_image(node, array, ijk_to_ras)
    node.CreateDefaultDisplayNodes()
    display = node.GetDisplayNode()
    display.SetAndObserveColorNodeID("vtkMRMLColorTableNodeGrey")
    display.AutoWindowLevelOn()
    for key, value in metadata.items():
        node.SetAttribute(f"DICOM.{key}", value)
    node.SetAttribute("MedOpenClaw.source", str(source.path))
    node.SetAttribute("DICOM.instanceFiles", "|".join(source.files))
    return node

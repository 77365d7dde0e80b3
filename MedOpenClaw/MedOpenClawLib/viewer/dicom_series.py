"""One DICOM series -> the volumes it really holds, each with geometry that is true to its slices.

ITK's series reader stacks whatever files it is given and takes one spacing for all of them: a three-plane
localizer becomes a 3-slice volume, a series with a missing block of slices is squeezed onto an even grid.
Slicer's DICOM scalar-volume plugin (Slicer/Slicer, Modules/Scripted/DICOMPlugins/DICOMScalarVolumePlugin.py,
``examineFiles``) instead splits a series into sub-series by the tags that make slices incompatible
(orientation, acquisition/temporal position, image type, ...), sorts each along the slice normal, checks that
the spacing is even (``spacingEpsilon`` 0.01 mm) and regularizes uneven acquisition geometry. This module does
the same from the headers (pydicom, no pixel data), starting from GDCM's series grouping (SimpleITK
``GetGDCMSeriesIDs``/``GetGDCMSeriesFileNames``):

1. Files are grouped by image plane: orientation (ImageOrientationPatient within 1e-4), matrix size, pixel
   spacing, and localizer image type. A series with several planes (a 3-plane localizer, radial MIPs) gives one
   volume per plane.
2. Slices that repeat a position are separated by TemporalPositionIdentifier, AcquisitionNumber, TriggerTime
   or ContentTime (the first of them that makes positions unique); if none does, that group is refused.
3. Slices are sorted by their distance along the normal. A gap larger than 1.5x the median gap (for two slices:
   their SliceThickness) splits the group (a missing block of slices is never bridged); a slice stack that is
   sheared (gantry tilt) is refused.
4. Spacing that stays uneven beyond 0.01 mm is regularized: the volume is resampled (linear along the normal)
   onto an even grid at the median gap, and the result says so.

Every decision that changes what is loaded is reported as a warning; a refused group carries its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SPACING_EPSILON_MM = 0.01  # Slicer's spacingEpsilon
ORIENTATION_EPSILON = 1e-4
SHEAR_EPSILON_MM = 0.05
GAP_SPLIT_RATIO = 1.5
TEMPORAL_TAGS = ("TemporalPositionIdentifier", "AcquisitionNumber", "TriggerTime", "ContentTime")
PLANE_NAMES = {0: "sagittal", 1: "coronal", 2: "axial"}
LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0, 1.0])  # DICOM patient space is LPS, Slicer's is RAS
HEADER_TAGS = ["ImageOrientationPatient", "ImagePositionPatient", "Rows", "Columns", "PixelSpacing", "ImageType",
               "NumberOfFrames", "SeriesNumber", "SeriesDescription", "SliceThickness",
               *TEMPORAL_TAGS]  # every tag the split reads


@dataclass
class SliceHeader:
    path: str
    orientation: tuple[float, ...] | None
    position: tuple[float, ...] | None
    rows: int
    columns: int
    pixel_spacing: tuple[float, float] | None
    localizer: bool
    frames: int
    series: str = ""  # "<SeriesNumber> <SeriesDescription>", for messages
    thickness: float | None = None  # SliceThickness, mm
    tags: dict = field(default_factory=dict)  # temporal tags present in the file

    def plane_key(self) -> tuple:
        orientation = None if self.orientation is None else tuple(
            round(value / ORIENTATION_EPSILON) for value in self.orientation)
        spacing = None if self.pixel_spacing is None else tuple(round(value, 4) for value in self.pixel_spacing)
        return orientation, self.rows, self.columns, spacing, self.localizer


@dataclass
class VolumePlan:
    """One loadable volume of a series: files in slice order and the LPS geometry to give it."""

    files: list[str]
    suffix: str = ""  # appended to the series name when a series yields several volumes
    origin_lps: np.ndarray | None = None
    direction_lps: np.ndarray | None = None  # 3x3, columns = i, j, k axes
    spacing: tuple[float, float, float] | None = None
    positions_mm: np.ndarray | None = None  # distance of each file along the normal
    resample_to: np.ndarray | None = None  # even distances to interpolate onto (uneven spacing)
    warnings: list[str] = field(default_factory=list)

    @property
    def has_geometry(self) -> bool:
        return self.origin_lps is not None

    def ijk_to_ras(self) -> np.ndarray:
        """The 4x4 voxel (i along a row, j down the columns, k along the normal) -> RAS matrix of the volume."""
        matrix = np.eye(4)
        matrix[:3, :3] = self.direction_lps @ np.diag(self.spacing)
        matrix[:3, 3] = self.origin_lps
        return LPS_TO_RAS @ matrix


@dataclass
class SeriesSplit:
    plans: list[VolumePlan]
    refused: list[str]  # reasons, one per refused group
    warnings: list[str]


def read_headers(files: list[str]) -> tuple[list[SliceHeader], list[str]]:
    """Headers of the files that pydicom can read; the others are listed as problems."""
    import pydicom

    headers, problems = [], []
    for path in files:
        try:
            dataset = pydicom.dcmread(path, stop_before_pixels=True, specific_tags=HEADER_TAGS)
            orientation = dataset.get("ImageOrientationPatient")
            position = dataset.get("ImagePositionPatient")
            spacing = dataset.get("PixelSpacing")
            image_type = [str(value).upper() for value in (dataset.get("ImageType") or [])]
            headers.append(SliceHeader(
                path=path,
                orientation=tuple(float(value) for value in orientation) if orientation else None,
                position=tuple(float(value) for value in position) if position else None,
                rows=int(dataset.get("Rows") or 0),
                columns=int(dataset.get("Columns") or 0),
                pixel_spacing=(float(spacing[0]), float(spacing[1])) if spacing else None,
                localizer="LOCALIZER" in image_type,
                frames=int(dataset.get("NumberOfFrames") or 1),
                series=" ".join(str(dataset.get(tag) or "") for tag in ("SeriesNumber", "SeriesDescription")).strip(),
                thickness=float(dataset.get("SliceThickness") or 0) or None,
                tags={tag: str(dataset.get(tag)) for tag in TEMPORAL_TAGS if dataset.get(tag) not in (None, "")},
            ))
        except Exception as error:  # pydicom raises many types for broken files
            problems.append(f"{path.rsplit('/', 1)[-1]}: not readable as DICOM ({type(error).__name__})")
    return headers, problems


def plane_name(normal: np.ndarray) -> str:
    axis = int(np.argmax(np.abs(normal)))
    return PLANE_NAMES[axis] if abs(normal[axis]) > 0.9 else "oblique"


def _by_temporal_tag(headers: list[SliceHeader]) -> tuple[str | None, list[list[SliceHeader]]]:
    """Groups without repeated positions, split by the first temporal tag that achieves it."""
    def unique_positions(group):
        positions = [tuple(np.round(h.position, 3)) for h in group]
        return len(set(positions)) == len(positions)

    if unique_positions(headers):
        return None, [headers]
    for tag in TEMPORAL_TAGS:
        values: dict[str, list[SliceHeader]] = {}
        for header in headers:
            values.setdefault(header.tags.get(tag, ""), []).append(header)
        if len(values) > 1 and all(unique_positions(group) for group in values.values()):
            return tag, [values[key] for key in sorted(values, key=_natural)]
    return "", []


def _natural(value: str):
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def _runs(distances: np.ndarray, thickness: float | None) -> list[slice]:
    """Index ranges of the sorted slices with no gap larger than GAP_SPLIT_RATIO x the typical gap: the median
    gap, or for two slices their SliceThickness (two slices far apart are two images, not one thick volume)."""
    if len(distances) < 2 or (len(distances) == 2 and not thickness):
        return [slice(0, len(distances))]
    gaps = np.diff(distances)
    limit = GAP_SPLIT_RATIO * (float(np.median(gaps)) if len(distances) > 2 else thickness)
    cuts = [0, *[index + 1 for index, gap in enumerate(gaps) if gap > limit], len(distances)]
    return [slice(start, stop) for start, stop in zip(cuts, cuts[1:])]  # no zip(strict=): Python 3.9 in Slicer 5.8


def _plan(headers: list[SliceHeader]) -> VolumePlan:
    """Geometry of slices that share one plane and are sorted along its normal (one run, no big gap)."""
    first = headers[0]
    row, column = np.array(first.orientation[:3]), np.array(first.orientation[3:])
    normal = np.cross(row, column)
    positions = np.array([header.position for header in headers])
    distances = positions @ normal
    row_spacing, column_spacing = first.pixel_spacing or (1.0, 1.0)
    plan = VolumePlan([header.path for header in headers], origin_lps=positions[0],
                      direction_lps=np.column_stack([row, column, normal]), positions_mm=distances)
    if len(headers) == 1:  # one image: its voxels are as thick as its slice
        plan.spacing = (column_spacing, row_spacing, first.thickness or 1.0)
        return plan
    gaps = np.diff(distances)
    spacing = float(np.median(gaps))
    plan.spacing = (column_spacing, row_spacing, spacing)
    if float(gaps.max() - gaps.min()) > SPACING_EPSILON_MM:
        count = int(round((distances[-1] - distances[0]) / spacing)) + 1
        plan.resample_to = distances[0] + spacing * np.arange(count)
        plan.warnings.append(
            f"slices are unevenly spaced ({gaps.min():.3g} to {gaps.max():.3g} mm): resampled onto an even "
            f"{spacing:.3g} mm grid ({count} slices) so the geometry stays true"
        )
    return plan


def _sheared(headers: list[SliceHeader]) -> bool:
    """Whether slice origins drift within the image plane (gantry tilt): not a rectilinear volume."""
    row, column = np.array(headers[0].orientation[:3]), np.array(headers[0].orientation[3:])
    positions = np.array([header.position for header in headers])
    in_plane = (positions - positions[0]) @ np.column_stack([row, column])
    return bool(np.abs(in_plane).max() > SHEAR_EPSILON_MM)


def split_series(files: list[str], folder: str) -> SeriesSplit:
    """The loadable volumes of one DICOM series (see the module docstring); messages name the series by its
    ``folder``, description and number."""
    headers, warnings = read_headers(files)
    description = f"{folder}: series {headers[0].series!r}" if headers and headers[0].series else folder
    if warnings:
        warnings = [f"{description}: {len(warnings)} file(s) skipped: " + "; ".join(warnings[:3])]
    plans: list[VolumePlan] = []
    refused: list[str] = []
    if not headers:
        return SeriesSplit([], [f"{description}: no readable DICOM file"], warnings)
    planes: dict[tuple, list[SliceHeader]] = {}
    for header in headers:
        planes.setdefault(header.plane_key(), []).append(header)
    multiple_planes = len(planes) > 1
    names_used: dict[str, int] = {}
    temporal_tags: set[str] = set()
    for group in planes.values():
        first = group[0]
        if first.frames > 1 or first.orientation is None or first.position is None:
            if len(group) > 1 and (first.frames > 1 or any(h.position is None for h in group)):
                refused.append(f"{description}: {len(group)} files without per-slice position/orientation "
                               "(or multi-frame files) cannot be stacked into one volume")
                continue
            plan = VolumePlan([first.path])
            if first.frames > 1:
                plan.warnings.append(f"{description}: multi-frame image: if slice orientation or spacing is "
                                     "non-uniform the image may be displayed incorrectly (Slicer's warning)")
            else:
                plan.warnings.append(f"{description}: no ImagePositionPatient/ImageOrientationPatient: the "
                                     "volume is placed at the origin with unit geometry")
            plans.append(plan)
            continue
        normal = np.cross(np.array(first.orientation[:3]), np.array(first.orientation[3:]))
        plane = ("localizer_" if first.localizer else "") + plane_name(normal)
        tag, temporal_groups = _by_temporal_tag(group)
        if not temporal_groups:
            refused.append(f"{description} ({plane}): {len(group)} slices repeat positions and no temporal tag "
                           f"({', '.join(TEMPORAL_TAGS)}) separates them")
            continue
        if tag:
            temporal_tags.add(tag)
        for temporal in temporal_groups:
            temporal.sort(key=lambda header: float(np.dot(header.position, normal)))
            if _sheared(temporal):
                refused.append(f"{description} ({plane}): slice positions drift within the image plane (gantry "
                               "tilt or a sheared stack): not loaded, its geometry cannot be a volume grid")
                continue
            distances = np.array([np.dot(header.position, normal) for header in temporal])
            runs = _runs(distances, temporal[0].thickness)
            if len(runs) > 1:
                gaps = np.diff(distances)
                warnings.append(
                    f"{description} ({plane}): slices are unevenly spaced (largest gap {gaps.max():.3g} mm, median "
                    f"{np.median(gaps):.3g} mm): split into {len(runs)} volumes at the gaps instead of one volume "
                    "with a wrong spacing"
                )
            for run in runs:
                plan = _plan(temporal[run])
                parts = [plane] if multiple_planes or first.localizer else []
                if tag:
                    parts.append(f"t{temporal[0].tags.get(tag, '')}")
                plan.suffix = "_".join(parts)
                names_used[plan.suffix] = names_used.get(plan.suffix, 0) + 1
                plan.warnings = [f"{description}: {message}" for message in plan.warnings]
                plans.append(plan)
    for suffix, count in names_used.items():
        if count > 1:
            numbered = [plan for plan in plans if plan.suffix == suffix]
            for index, plan in enumerate(numbered, 1):
                plan.suffix = f"{suffix}_{index}" if suffix else str(index)
    if multiple_planes:
        warnings.append(f"{description}: {len(planes)} image planes in one series (e.g. a localizer): loaded as "
                        "separate volumes, one per plane")
    if temporal_tags:
        warnings.append(f"{description}: slices repeat positions: one volume per {' / '.join(sorted(temporal_tags))}")
    return SeriesSplit(plans, refused, warnings)


def resample_along_normal(array_kji: np.ndarray, positions: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Linear interpolation of slices at sorted ``positions`` onto the even ``targets`` (both in mm)."""
    upper = np.clip(np.searchsorted(positions, targets, side="right"), 1, len(positions) - 1)
    lower = upper - 1
    span = positions[upper] - positions[lower]
    weight = np.clip((targets - positions[lower]) / np.where(span > 0, span, 1.0), 0.0, 1.0)
    weight = weight.astype(array_kji.dtype)[:, None, None]
    return array_kji[lower] * (1 - weight) + array_kji[upper] * weight

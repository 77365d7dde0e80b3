"""Helpers shared by the dataset loaders: skipping a case, CSV reading, masks -> localization records, slides."""

from __future__ import annotations

import csv
from pathlib import Path

from ..cases import USABLE_STEP, Case, CaseFormatError, VolumeRef
from ..package import PackageWriter, place_file
from ..scoring.geometry import VoxelMask, evidence_area, interior_reference_point, mask_from_file, region_geometry


class SkipCase(Exception):
    """Raised inside a loader for one case: it is skipped with this message as the manifest reason, counted
    under the cohort-filter ``step`` that excluded it."""

    def __init__(self, reason: str, step: str = USABLE_STEP):
        super().__init__(reason)
        self.step = step


def decoded_nifti_shape(path: Path) -> tuple[int, ...]:
    """The shape of a NIfTI volume after decoding every voxel. A truncated download passes a header-only
    check; decoding here skips its case at prepare time instead of failing the episode at run time."""
    import nibabel as nib
    import numpy as np

    try:
        image = nib.load(path)
        np.asanyarray(image.dataobj)
    except Exception as error:  # nibabel and gzip raise EOFError, zlib.error, OSError, ... for broken files
        raise SkipCase(f"unreadable NIfTI {path.name}: {type(error).__name__}: {error}") from error
    return tuple(image.shape)


def find_one(root: Path, pattern: str, what: str) -> Path:
    """The single file matching ``pattern`` under ``root`` (first in sorted order if several)."""
    matches = sorted(path for path in root.rglob(pattern) if path.is_file())
    if not matches:
        raise CaseFormatError(f"{root}: no {what} ({pattern}) found")
    return matches[0]


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    """CSV rows with header names and values stripped (``"Histology "`` -> ``"Histology"``); BOM tolerated."""
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = [name.strip() for name in next(reader)]
        except StopIteration as error:
            raise CaseFormatError(f"{path}: empty CSV") from error
        return [
            {name: (value or "").strip() for name, value in zip(header, row)}
            for row in reader
            if any(cell.strip() for cell in row)
        ]


def column(row: dict[str, str], *fragments: str) -> str | None:
    """Value of the first column whose lower-cased name contains all ``fragments`` (long CSV headers)."""
    for name, value in row.items():
        lowered = name.lower()
        if all(fragment.lower() in lowered for fragment in fragments):
            return value
    return None


def localization_record(mask_path: Path, source_volume_name: str) -> dict | None:
    """The hidden localization block for a lesion mask (None when the mask is empty: nothing to localize).

    A truncated or corrupt mask file skips the case: only its header was read before this point.
    """
    try:
        mask: VoxelMask = mask_from_file(mask_path)
    except Exception as error:  # nibabel and gzip raise EOFError, zlib.error, OSError, ... for broken files
        raise SkipCase(f"unreadable lesion mask {mask_path.name}: {type(error).__name__}: {error}") from error
    if not mask.data.any():
        return None
    ranges = mask.ras_ranges()
    point, slices = mask.interior_reference()
    return {
        "source_volume_name": source_volume_name,
        "mask": mask_path.name,
        "ras_ranges": {axis: [round(low, 4), round(high, 4)] for axis, (low, high) in ranges.items()},
        "reference_ras": point,
        "reference_key_slices": slices,
    }


def region_records(regions: list[tuple[str, str, list]], writer: PackageWriter) -> list[dict]:
    """(label, kind, rings) -> ground-truth region dicts (``polygon``: the outer ring, ``holes``: interior rings
    when there are any), each target with an interior reference point clear of the exclusions
    (:func:`..scoring.geometry.interior_reference_point`).

    A region that cannot be used -- fewer than three vertices, no area, nothing left outside the exclusions --
    is dropped with its reason counted in the manifest (``dropped_regions``); the slide keeps its other regions,
    and only a slide that had target regions and has none left is skipped (SkipCase)."""
    records, dropped = [], []
    for label, kind, rings in regions:
        record = {"label": label, "kind": kind, "polygon": rings[0], **({"holes": rings[1:]} if rings[1:] else {})}
        if len(rings[0]) < 3 or region_geometry(record).is_empty:
            dropped.append(f"{kind} polygon with fewer than three vertices or no area")
        else:
            records.append(record)
    exclusions = [record for record in records if record["kind"] == "exclusion"]
    targets = []
    for record in (record for record in records if record["kind"] != "exclusion"):
        try:
            record["reference_point"] = interior_reference_point(evidence_area([record], exclusions))
            targets.append(record)
        except ValueError as error:
            dropped.append(f"{record['kind']} region: {error}")
    counts = writer.notes.setdefault("dropped_regions", {})
    for reason in dropped:
        counts[reason] = counts.get(reason, 0) + 1
    if dropped and not targets and any(kind != "exclusion" for _, kind, _ in regions):
        raise SkipCase("no usable reference region remains: " + "; ".join(sorted(set(dropped))))
    return targets + exclusions


# ------------------------------------------------------------------------------------------------ slides
def slide_size(path: Path) -> list[int]:
    import tifffile

    try:
        with tifffile.TiffFile(path) as tiff:
            page = tiff.pages[0]
            if not page.is_tiled:
                raise SkipCase(f"{path.name} is not a tiled (pyramidal) TIFF")
            return [int(page.imagewidth), int(page.imagelength)]
    except SkipCase:
        raise
    except Exception as error:
        raise SkipCase(f"unreadable slide {path.name}: {error}") from error


def place_slide(slide: Path, case_id: str, writer: PackageWriter) -> tuple[str, list[int]]:
    size = slide_size(slide)
    target = place_file(slide, writer.data_dir(case_id) / slide.name)
    return writer.relative(target), size


def volume_case(case_id: str, writer: PackageWriter, volumes: list[VolumeRef], brief: dict, **fields) -> Case:
    """The case of one study's volumes: its whole data folder opened in the viewer, with the questions of the
    writer's module; ``fields`` are the module's own (``image_space``)."""
    data_dir = writer.relative(writer.data_dir(case_id))
    return Case(module=writer.spec.name, case_id=case_id, data_dir=data_dir, open_paths=[data_dir], volumes=volumes,
                questions=list(writer.spec.questions), brief=brief, **fields)


def slide_case(case_id: str, slide: str, writer: PackageWriter) -> Case:
    """The case of one slide: opened in the viewer as is, with the questions of the writer's module."""
    return Case(
        module=writer.spec.name,
        case_id=case_id,
        data_dir=writer.relative(writer.data_dir(case_id)),
        open_paths=[slide],
        slide=slide,
        questions=list(writer.spec.questions),
        brief={"case_alias": case_id},
    )


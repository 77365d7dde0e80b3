"""Helpers shared by the dataset loaders: the questions of a module, CSV reading, masks -> localization records."""

from __future__ import annotations

import csv
from pathlib import Path

from ..cases import USABLE_STEP, CaseFormatError, Question
from ..scoring.geometry import VoxelMask, mask_from_file, point_in_polygon, polygon_interior_point


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


def questions_for(module: str) -> list[Question]:
    """The questions of ``module``'s cases, as its spec defines them (what the loaders write into each case)."""
    from ..modules import get

    return list(get(module).questions)


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


def region_records(regions: list[tuple[str, str, list]]) -> list[dict]:
    """(label, kind, polygon) -> ground-truth region dicts with an interior reference point per
    non-exclusion."""
    exclusions = [polygon for _, kind, polygon in regions if kind == "exclusion"]
    records = []
    for label, kind, polygon in regions:
        if len(polygon) < 3:
            raise SkipCase(f"{kind} polygon {label!r} has fewer than three vertices")
        record = {"label": label, "kind": kind, "polygon": polygon}
        if kind != "exclusion":
            try:
                record["reference_point"] = polygon_interior_point(polygon, avoid=exclusions)
            except ValueError as error:
                raise SkipCase(f"{kind} region {label!r}: {error}") from error
            if not point_in_polygon(*record["reference_point"], polygon):
                raise SkipCase(f"{kind} region {label!r}: no interior reference point found")
        records.append(record)
    return records

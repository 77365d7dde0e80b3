"""LUMIERE's lesion-state rule: the four target/non-target fields of a CURRENT study derived from the DeepBraTumIA
segmentations of it and of the OLD one (the RANO size rule of :func:`lesion_size`), used by the loader, the
synthetic writer and the spec's ground-truth check (:func:`lumiere_problems`, one of its ``truth_checks``): a
``new_*`` lesion is also a ``current_*`` one, and NonMeasurableLesions = yes requires a non-target enhancing lesion
in the CURRENT mask."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ...cases import Case, GroundTruth
    from ...spec import ModuleSpec

MEASURABLE_MM = 10.0  # RANO (Wen et al. 2010): two perpendicular diameters of an enhancing lesion >= 10 mm
MEASURABLE_SLICES = 2  # ... visible on two or more axial slices
LESION_FLOOR_MM = 5.0  # below this longest diameter a mask component is segmentation noise, not a lesion
LESION_FIELDS = ("current_target_lesion", "new_target_lesion", "current_non_target_lesion", "new_non_target_lesion")


def axial_diameters(section: np.ndarray, spacing_mm) -> tuple[float, float]:
    """(longest diameter, longest extent perpendicular to it) in mm of one axial cross-section, measured over
    the outer corners of its voxels (a single 1 mm voxel spans 1.41 mm along its diagonal)."""
    from scipy.spatial import ConvexHull

    cells = np.argwhere(section)
    corners = np.unique(np.concatenate([cells + offset for offset in ((0, 0), (0, 1), (1, 0), (1, 1))]), axis=0)
    points = corners * np.asarray(spacing_mm, dtype=float)[:2]
    points = points[ConvexHull(points).vertices]
    gaps = points[:, None, :] - points[None, :, :]
    lengths = np.sqrt((gaps ** 2).sum(axis=-1))
    first, second = np.unravel_index(int(np.argmax(lengths)), lengths.shape)
    longest = float(lengths[first, second])
    direction = gaps[first, second] / longest
    across = points @ np.array([-direction[1], direction[0]])
    return longest, float(across.max() - across.min())


def lesion_size(component: np.ndarray, spacing_mm) -> str:
    """``"target"`` when RANO-measurable (on some axial slice both the longest diameter and the longest extent
    perpendicular to it are >= 10 mm, and the lesion shows on >= 2 axial slices), ``"non_target"`` for any
    other lesion, ``"noise"`` when its longest in-plane diameter stays below 5 mm on every slice (a speck of
    the automatic mask that no reader would call a lesion)."""
    slices = [k for k in range(component.shape[2]) if component[:, :, k].any()]
    diameters = [axial_diameters(component[:, :, k], spacing_mm) for k in slices]
    if max(longest for longest, _ in diameters) < LESION_FLOOR_MM:
        return "noise"
    bidimensional = any(min(pair) >= MEASURABLE_MM for pair in diameters)
    return "target" if bidimensional and len(slices) >= MEASURABLE_SLICES else "non_target"


def lesion_fields(old: np.ndarray | None, current: np.ndarray | None, spacing_mm, enhancing_label: int) -> dict:
    """The four target/non-target fields of CURRENT from two label maps on one grid (None when unknown).

    Each connected enhancing component of CURRENT is sized by :func:`lesion_size` (noise is ignored); a lesion
    is new when it does not touch OLD's tumour (any label, dilated by one voxel).
    """
    from scipy import ndimage

    if old is None or current is None or old.shape != current.shape:
        return dict.fromkeys(LESION_FIELDS)
    old_tumour = ndimage.binary_dilation(old > 0)
    components, _ = ndimage.label(current == enhancing_label)
    fields = dict.fromkeys(LESION_FIELDS, False)
    for index, region in enumerate(ndimage.find_objects(components), 1):
        component = components[region] == index
        kind = lesion_size(component, spacing_mm)
        if kind == "noise":
            continue
        new = not old_tumour[region][component].any()
        fields[f"current_{kind}_lesion"] = True
        fields[f"new_{kind}_lesion"] = fields[f"new_{kind}_lesion"] or new
    return fields


def label_map(path) -> tuple[np.ndarray, np.ndarray] | None:
    """(integer label array, voxel spacing in mm) of a segmentation NIfTI, or None when there is none."""
    import nibabel as nib

    if path is None or not path.is_file():
        return None
    image = nib.load(path)
    return np.asarray(image.dataobj), np.sqrt((np.asarray(image.affine)[:3, :3] ** 2).sum(axis=0))


def lesion_fields_of_files(old_path, current_path, enhancing_label: int) -> dict:
    old, current = label_map(old_path), label_map(current_path)
    if old is None or current is None:
        return lesion_fields(None, None, (1.0, 1.0, 1.0), enhancing_label)
    return lesion_fields(old[0], current[0], current[1], enhancing_label)


def enhancing_label_of(truth: GroundTruth) -> int:
    """The DeepBraTumIA label the LUMIERE loader took as enhancing tumour (recorded in the hidden labels)."""
    return int((truth.labels.get("segmentation_labels") or {}).get("enhancing", 2))


def lumiere_problems(case: Case, truth: GroundTruth, spec: ModuleSpec) -> list[str]:
    """The LUMIERE lesion-state fields against the hidden segmentations and against each other."""
    enhancing_label = enhancing_label_of(truth)
    hidden = truth.hidden_dir
    stored = truth.evidence_fields
    problems = []
    if hidden is not None:
        derived = lesion_fields_of_files(hidden / "old_seg.nii.gz", hidden / "current_seg.nii.gz", enhancing_label)
        for name, value in derived.items():
            if stored.get(name) != value:
                problems.append(f"{name}={stored.get(name)} but the segmentations give {value}")
    for kind in ("target", "non_target"):
        if stored.get(f"new_{kind}_lesion") and stored.get(f"current_{kind}_lesion") is False:
            problems.append(f"new_{kind}_lesion is true but current_{kind}_lesion is false")
    if stored.get("non_measurable_lesion") and stored.get("current_non_target_lesion") is False:
        problems.append(
            "NonMeasurableLesions = yes but the CURRENT segmentation has no non-measurable enhancing lesion "
            "(current_non_target_lesion = false)"
        )
    return problems

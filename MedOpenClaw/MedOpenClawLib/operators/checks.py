"""What the operator actions share: points to voxel indices, segment statistics, the audited record of a call, and
the alignment and binding checks over the artifact graph (refuse an established misalignment, else warn), the
ROI mask and the PET calibration a measurement needs."""

from __future__ import annotations

import time

import numpy as np
import pydicom
import pydicom.errors

from ..core.result import ActionError
from ..viewer.actions import screen_points_to_ras
from . import scene_nodes
from .artifacts import VolumeArtifact
from .image import ImageVolume
from .quantify import region_statistics
from .suv import SuvError, suv_calibration


def artifact_graph_state(context) -> dict:
    return scene_nodes.artifact_graph(context.engine).to_json()



def points_to_ijk(ctx, node, image: ImageVolume, points_ras, points_1000, view,
                  image_id: str | None = None) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """(RAS, voxel indices, warnings) of the given points; refuses points that lie outside the volume, and
    screen points read on a view showing a volume established to be in another space than ``node``. Screen points
    are read on the image the agent saw (``image_id``, else the last one returned for ``view``)."""
    if (points_ras is None) == (points_1000 is None):
        raise ActionError("invalid_argument", "give points either in RAS mm or as 0..999 screen points, not both")
    warnings: list[dict] = []
    if points_1000 is not None:
        if view is None:
            raise ActionError("invalid_argument", "screen points need the `view` they were read from")
        shown = ctx.engine.scene.GetNodeByID(ctx.engine.logic(view).GetSliceCompositeNode().GetBackgroundVolumeID()
                                             or "")
        if shown is None:
            raise ActionError("no_volume", f"the {view} view shows no volume to read points on")
        warnings = region_space_warnings(ctx, shown, node, "the screen points were read on")
        points_ras, reference = screen_points_to_ras(ctx, view, points_1000, image_id)
        warnings += reference.get("warnings", [])
    ras = np.asarray(points_ras, dtype=float)
    ijk = image.ras_to_ijk(ras)
    inside = image.contains_ijk(ijk)
    if not inside.all():
        bad = ", ".join(str(np.round(point, 1).tolist()) for point in ras[~inside])
        raise ActionError("outside_volume", f"point(s) {bad} lie outside {node.GetName()}; points must be RAS mm "
                                            "inside the volume being segmented")
    return ras, np.rint(ijk).astype(int), warnings



def segment_statistics(image: ImageVolume, labelmap: np.ndarray, names: dict[int, str]) -> list[dict]:
    return [
        {"segment": name, "label_value": value, **region_statistics(image, labelmap == value).to_json()}
        for value, name in names.items()
    ]



def operator_data(inputs: dict, parameters: dict, outputs: dict, started: float,
                  warnings: list[dict] | None = None, **extra) -> dict:
    """The audited record of an operator call; ``warnings`` (alignment doubts) appear only when there are some."""
    data = {"inputs": inputs, "parameters": parameters, "outputs": outputs,
            "seconds": round(time.perf_counter() - started, 3), **extra}
    if warnings:
        data["warnings"] = warnings
    return data



def alignment_warnings(ctx, first, second) -> list[dict]:
    return scene_nodes.artifact_graph(ctx.engine).alignment(first.GetID(), second.GetID())



def refuse_known_mismatch(warnings: list[dict], what: str) -> None:
    """Established misalignment (different frames, misbound transform): the result would be meaningless data."""
    for warning in warnings:
        if warning["certain"]:
            raise ActionError("wrong_space", f"{what}: {warning['message']}")



def binding_warnings(graph, volume: VolumeArtifact, what: str) -> list[dict]:
    """Check a planned binding or resampling on the graph: refuse an established misbinding, else warn."""
    problem = graph.with_volume(volume).space_of(volume.id).problem
    warnings = [problem] if problem else []
    refuse_known_mismatch(warnings, what)
    return warnings



def region_space_warnings(ctx, drawn_on, target, what: str) -> list[dict]:
    """A region (segment or ROI) measured on another volume than the one it was drawn on: refuse when the two
    are established to be in different spaces, else return the alignment warnings (F3)."""
    if drawn_on is None or drawn_on.GetID() == target.GetID():
        return []
    warnings = alignment_warnings(ctx, drawn_on, target)
    refuse_known_mismatch(warnings, f"{what} {drawn_on.GetName()}")
    return warnings



def roi_mask(ctx, evidence_id: str, target) -> tuple[np.ndarray, dict, object | None]:
    """The box ROI as a mask on ``target``'s grid, the region description, and the volume it was drawn on."""
    item = next((item for item in ctx.evidence.items if item.id == evidence_id), None)
    if item is None or item.kind != "roi":
        raise ActionError("evidence_not_found", f"no ROI evidence {evidence_id!r}")
    node = ctx.engine.scene.GetNodeByID(item.node_id) if item.node_id else None
    if node is None or not node.IsA("vtkMRMLMarkupsROINode"):
        raise ActionError("unsupported_roi", "quantify measures box ROIs; use segment_region for other shapes")
    center, size = np.array(item.data["center_ras"]), np.array(item.data["size_mm"])
    image = scene_nodes.image_of(target)
    k, j, i = np.indices(image.array.shape)
    ras = image.ijk_to_ras_points(np.stack([i.ravel(), j.ravel(), k.ravel()], axis=1))
    inside = np.all(np.abs(ras - center) <= size / 2.0 + 1e-6, axis=1).reshape(image.array.shape)
    drawn_on = next((node for node in ctx.engine.volume_nodes() if node.GetName() == item.data.get("volume_name")),
                    None)
    return inside, {"roi_evidence_id": evidence_id, "roi_center_ras": item.data["center_ras"]}, drawn_on



def pet_calibration(node):
    """SUV calibration from the volume's DICOM header, or why there is none (never a guessed factor)."""
    if (node.GetAttribute("DICOM.Modality") or "").upper() != "PT":
        return None, None
    files = (node.GetAttribute("DICOM.instanceFiles") or "").split("|")
    if not files[0]:
        return None, "the PET volume was not loaded from DICOM, so its units are unknown"
    try:
        return suv_calibration(pydicom.dcmread(files[0], stop_before_pixels=True)), None
    except (OSError, pydicom.errors.InvalidDicomError, SuvError) as error:
        return None, str(error)


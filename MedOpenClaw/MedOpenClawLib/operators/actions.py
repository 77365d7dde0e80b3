"""Track B analysis operators as registry actions: VISTA3D, registration workflow, seeded segmentation,
quantification and DICOM SEG.

Every handler validates its inputs against the image space before it changes the scene, returns the node ids
it created, its parameters, its timing and any files with their sha256 (the registry writes them to the audit
trace), and reports the artifact-graph warnings that concern its inputs. ``install`` adds the artifact graph
to the viewer state and the F3 check to the viewer's fusion action.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pydicom
import pydicom.errors

from ..core.arguments import IMAGE_ID, NAME, POINTS_1000, POINTS_RAS, SIZE, VIEW, VOLUME, VOLUME_GIVEN, VOLUME_REF
from ..core.audit import fresh_path, sha256_file
from ..core.dependencies import require
from ..core.result import ActionError, Result, add_warning
from ..core.toolset import Toolset
from ..viewer.actions import render, target_views
from . import brainsfit, scene_nodes, vista3d
from .artifacts import VolumeArtifact
from .checks import (
    artifact_graph_state,
    binding_warnings,
    operator_data,
    pet_calibration,
    points_to_ijk,
    region_space_warnings,
    roi_mask,
    segment_statistics,
)
from .image import ImageVolume
from .quantify import region_statistics
from .region_growing import METHODS, GrowingParameters, grow_region
from .registration import INITIALIZATIONS, INTERPOLATIONS, TRANSFORM_TYPES, RegistrationSettings, register, resample

OPERATORS = Toolset("operators")
TRACKS = ("B",)

TRANSFORM = {"type": "string", "description": "name or id of a transform"}


def install(context) -> None:
    """Expose the artifact graph in the viewer state and warn on unaligned fusion; idempotent."""
    if context.extensions.get("operators"):
        return
    context.extensions["operators"] = True
    context.state_providers["artifacts"] = lambda: artifact_graph_state(context)
    context.fusion_checks.append(
        lambda background, foreground: scene_nodes.artifact_graph(context.engine).fusion_warnings(
            background.GetID(), foreground.GetID() if foreground is not None else None
        )
    )


OPERATORS.attach = install


# ------------------------------------------------------------------------------------------------ VISTA3D
@OPERATORS.action(
    "vista3d_segment", "operator",
    "Segment a CT volume with MONAI VISTA3D: class prompts by name or id (e.g. 'liver', 'lung tumor', 23), "
    "and/or point prompts (RAS mm, or 0..999 points on a view) for one class. Creates a segmentation bound to the "
    "volume and returns per-segment volume (ml), centroid RAS, bounding box and diameters.",
    {**VOLUME,
     "label_prompt": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}, "minItems": 1,
                      "maxItems": 16},
     "point_prompts_ras": POINTS_RAS, "point_prompts_1000": POINTS_1000, "view": VIEW, "image_id": IMAGE_ID,
     "point_labels": {"type": "array", "items": {"type": "integer", "enum": [0, 1]}, "minItems": 1,
                      "maxItems": 16, "description": "1 = inside the structure, 0 = outside; default all 1"},
     "segmentation_name": NAME, "size": SIZE},
    tracks=TRACKS,
    anyOf=[{"required": ["label_prompt"]}, {"required": ["point_prompts_ras"]}, {"required": ["point_prompts_1000"]}],
)
def vista3d_segment(ctx, size: int, volume_id=None, volume_name=None, label_prompt=None, point_prompts_ras=None,
                    point_prompts_1000=None, view=None, image_id=None, point_labels=None,
                    segmentation_name=None) -> Result:
    started = time.perf_counter()
    require("vista3d")
    node = ctx.engine.find_volume(volume_id, volume_name)
    image = scene_nodes.image_of(node)
    try:
        vista3d.check_ct_input(image.array, image.metadata["modality"])
        table = vista3d.label_table()
        labels = [table.resolve(prompt) for prompt in label_prompt] if label_prompt else None
        points, warnings = None, []
        if point_prompts_ras is not None or point_prompts_1000 is not None:
            points, _, warnings = points_to_ijk(ctx, node, image, point_prompts_ras, point_prompts_1000, view,
                                                image_id)
            if point_labels is not None and len(point_labels) != len(points):
                raise ActionError("invalid_argument", "point_labels must have one entry per point")
        bundle = vista3d.bundle_from_environment()
        network = vista3d.load_network(bundle)
        output = vista3d.segment(network, image, bundle.settings, labels,
                                 None if points is None else points.tolist(), point_labels)
    except vista3d.Vista3DError as error:
        raise ActionError(error.code, error.message) from error
    present = sorted(int(value) for value in np.unique(output.labelmap.array) if value != 0)
    names = {value: (table.names[value] if labels else "point prompt segment") for value in present}
    absent = [table.names[value] for value in output.label_ids if labels and value not in present]
    segmentation = scene_nodes.add_segmentation(
        ctx.engine.app, segmentation_name or f"{node.GetName()} VISTA3D", node, output.labelmap.array, names,
        "vista3d_segment")
    data = operator_data(
        {"volume_id": node.GetID(), "volume_name": node.GetName()},
        {"label_prompt": labels, "expanded_labels": output.label_ids,
         "point_prompts_ras": None if points is None else np.round(points, 3).tolist(),
         "point_labels": point_labels, "bundle": str(bundle.root), "device": output.device,
         "patch_size": list(bundle.settings.patch_size), "spacing_mm": list(bundle.settings.spacing_mm)},
        {"segmentation_id": segmentation.GetID(), "segmentation_name": segmentation.GetName()},
        started,
        warnings,
        segments=segment_statistics(image, output.labelmap.array, names),
        absent_labels=absent,
    )
    if not present:
        add_warning(data, "nothing_found", "VISTA3D found none of the prompted structures in this volume")
    return render(ctx, target_views(ctx, None), size, data)


# ------------------------------------------------------------------------------------------- registration
@OPERATORS.action(
    "register_volumes", "operator",
    "Register a moving volume to a fixed volume (BRAINSFit in Slicer; Mattes mutual information). Creates a "
    "linear transform node and returns its id and moving-to-fixed 4x4 RAS matrix. It is NOT applied: then call "
    "apply_transform or resample_volume, and verify with fusion.",
    {"fixed_volume_ref": VOLUME_REF, "moving_volume_ref": VOLUME_REF,
     "transform_type": {"type": "string", "enum": list(TRANSFORM_TYPES), "default": "rigid"},
     "initialization": {"type": "string", "enum": list(INITIALIZATIONS), "default": "moments"},
     "transform_name": NAME},
    required=["fixed_volume_ref", "moving_volume_ref"],
    tracks=TRACKS,
)
def register_volumes(ctx, fixed_volume_ref, moving_volume_ref, transform_type: str, initialization: str,
                     transform_name=None) -> Result:
    started = time.perf_counter()
    fixed = ctx.engine.find_volume(volume_name=fixed_volume_ref)
    moving = ctx.engine.find_volume(volume_name=moving_volume_ref)
    if fixed.GetID() == moving.GetID():
        raise ActionError("invalid_argument", "fixed and moving must be different volumes")
    for node in (fixed, moving):
        if node.GetParentTransformNode() is not None:
            raise ActionError("transformed_input", f"{node.GetName()} is under transform "
                              f"{node.GetParentTransformNode().GetName()}; register the untransformed volume")
    settings = RegistrationSettings()
    attributes = {scene_nodes.FIXED: fixed.GetID(), scene_nodes.MOVING: moving.GetID(),
                  scene_nodes.TRANSFORM_TYPE: transform_type, scene_nodes.OPERATOR: "register_volumes"}
    name = transform_name or f"{moving.GetName()} to {fixed.GetName()}"
    extra = {}
    if brainsfit.available(ctx.engine.app):
        transform = scene_nodes.add_transform(ctx.engine.scene, name, np.eye(4), attributes)
        brainsfit.run_brainsfit(fixed, moving, transform, transform_type, initialization, settings)
        backend = "BRAINSFit"
    else:
        result = register(scene_nodes.image_of(fixed), scene_nodes.image_of(moving), transform_type, initialization,
                          settings)
        transform = scene_nodes.add_transform(ctx.engine.scene, name, result.matrix_ras, attributes)
        backend = "SimpleITK"
        extra = {"final_metric": result.to_json()["final_metric"], "iterations": result.iterations,
                 "stop_conditions": result.stop_conditions}
    matrix = scene_nodes.transform_matrix(transform)
    return Result(ok=True, data=operator_data(
        {"fixed_volume_id": fixed.GetID(), "moving_volume_id": moving.GetID()},
        {"transform_type": transform_type, "initialization": initialization, "backend": backend,
         "metric": "MattesMutualInformation", "histogram_bins": settings.histogram_bins,
         "sampling_percentage": settings.sampling_percentage, "seed": settings.seed},
        {"transform_id": transform.GetID(), "transform_name": transform.GetName()},
        started,
        transform_id=transform.GetID(),
        matrix_ras=np.round(matrix, 6).tolist(),
        **extra,
    ))


@OPERATORS.action(
    "apply_transform", "operator",
    "Place a volume under a registration transform (no resampling), so it is displayed in the transform's fixed "
    "space. Refused when the transform was estimated for a volume in another frame of reference.",
    {**VOLUME, "transform_name": TRANSFORM, "size": SIZE},
    required=["transform_name"],
    tracks=TRACKS,
    anyOf=VOLUME_GIVEN,
)
def apply_transform(ctx, transform_name, size: int, volume_id=None, volume_name=None) -> Result:
    started = time.perf_counter()
    node = ctx.engine.find_volume(volume_id, volume_name)
    transform = scene_nodes.find_transform(ctx.engine.scene, transform_name)
    if node.GetAttribute(scene_nodes.DERIVED_FROM):
        raise ActionError("already_resampled", f"{node.GetName()} was produced by resample_volume and is already "
                                               "in its reference space")
    graph = scene_nodes.artifact_graph(ctx.engine)
    planned = replace(graph.volumes[node.GetID()], parent_transform=transform.GetID())
    warnings = binding_warnings(graph, planned, f"cannot apply {transform.GetName()} to {node.GetName()}")
    previous = node.GetParentTransformNode()
    overlays = scene_nodes.bound_overlays(ctx.engine.scene, node)
    for moved in (node, *overlays):
        moved.SetAndObserveTransformNodeID(transform.GetID())
    data = operator_data(
        {"volume_id": node.GetID(), "transform_id": transform.GetID()},
        {"replaced_transform_id": previous.GetID() if previous is not None else None},
        {"volume_id": node.GetID(), "parent_transform_id": transform.GetID(),
         "moved_overlay_ids": [overlay.GetID() for overlay in overlays]},
        started,
        warnings,
    )
    return render(ctx, target_views(ctx, None), size, data)


@OPERATORS.action(
    "resample_volume", "operator",
    "Resample a volume through a registration transform onto a reference volume's grid (BRAINSResample in "
    "Slicer), creating a new volume in the reference space.",
    {**VOLUME, "transform_name": TRANSFORM, "reference_volume_ref": VOLUME_REF,
     "interpolation": {"type": "string", "enum": list(INTERPOLATIONS), "default": "linear"},
     "output_name": NAME},
    required=["transform_name", "reference_volume_ref"],
    tracks=TRACKS,
    anyOf=VOLUME_GIVEN,
)
def resample_volume(ctx, transform_name, reference_volume_ref, interpolation: str, volume_id=None, volume_name=None,
                    output_name=None) -> Result:
    started = time.perf_counter()
    moving = ctx.engine.find_volume(volume_id, volume_name)
    reference = ctx.engine.find_volume(volume_name=reference_volume_ref)
    transform = scene_nodes.find_transform(ctx.engine.scene, transform_name)
    if reference.GetParentTransformNode() is not None:
        raise ActionError("transformed_input", f"reference {reference.GetName()} is under a transform")
    graph = scene_nodes.artifact_graph(ctx.engine)
    planned = VolumeArtifact("planned output", f"{moving.GetName()} resampled",
                             graph.volumes[reference.GetID()].grid_key, derived_from=moving.GetID(),
                             via_transform=transform.GetID(), reference=reference.GetID())
    warnings = binding_warnings(graph, planned, f"cannot resample {moving.GetName()} through {transform.GetName()}")
    attributes = {scene_nodes.DERIVED_FROM: moving.GetID(), scene_nodes.VIA_TRANSFORM: transform.GetID(),
                  scene_nodes.REFERENCE: reference.GetID(), scene_nodes.OPERATOR: "resample_volume"}
    name = output_name or f"{moving.GetName()} resampled"
    if brainsfit.available(ctx.engine.app):
        reference_image = scene_nodes.image_of(reference)
        output = scene_nodes.add_volume(ctx.engine.scene, name, ImageVolume(
            np.zeros_like(reference_image.array, dtype=np.float32), reference_image.ijk_to_ras), attributes)
        brainsfit.run_brainsresample(moving, reference, transform, output, interpolation, 0.0)
        backend = "BRAINSResample"
    else:
        image = resample(scene_nodes.image_of(moving, world=False), scene_nodes.image_of(reference),
                         scene_nodes.transform_matrix(transform), interpolation)
        output = scene_nodes.add_volume(ctx.engine.scene, name, image, attributes)
        backend = "SimpleITK"
    for key in ("DICOM.Modality", "DICOM.Units"):
        if moving.GetAttribute(key):
            output.SetAttribute(key, moving.GetAttribute(key))
    data = operator_data(
        {"volume_id": moving.GetID(), "transform_id": transform.GetID(), "reference_volume_id": reference.GetID()},
        {"interpolation": interpolation, "backend": backend},
        {"volume_id": output.GetID(), "volume_name": output.GetName()},
        started,
        warnings,
    )
    return Result(ok=True, data=data)


# ------------------------------------------------------------------------------------- seeded segmentation
@OPERATORS.action(
    "segment_region", "operator",
    "Segment the lesion under seed points (RAS mm, or 0..999 points on a view) by region growing. Seed inside the "
    "lesion where its signal is most uniform, on the volume where it stands out (brain tumour with oedema: FLAIR; "
    "lung tumour: CT). 'confidence' (default) keeps voxels within multiplier x spread of the intensity of the "
    "tissue under the seeds (their 3x3x3 neighbourhoods' mode nearest the seed voxels; spread at most twice the "
    "image noise), 'threshold' within [lower, upper]. Leak stops cut growth that passes through a narrow contact "
    "into neighbouring tissue or starts adding tissue of a different intensity, and growth ends at max_volume_ml; "
    "data.stop says which ended it. Returns the same statistics as vista3d_segment.",
    {**VOLUME, "seeds_ras": POINTS_RAS, "seeds_1000": POINTS_1000, "view": VIEW, "image_id": IMAGE_ID,
     "method": {"type": "string", "enum": list(METHODS), "default": "confidence"},
     "lower": {"type": "number"}, "upper": {"type": "number"},
     "multiplier": {"type": "number", "exclusiveMinimum": 0, "maximum": 10, "default": 2.5},
     "max_volume_ml": {"type": "number", "exclusiveMinimum": 0, "maximum": 100000, "default": 500},
     "segment_name": NAME, "size": SIZE},
    tracks=TRACKS,
    anyOf=[{"required": ["seeds_ras"]}, {"required": ["seeds_1000"]}],
)
def segment_region(ctx, method: str, multiplier: float, max_volume_ml: float, size: int, volume_id=None,
                   volume_name=None, seeds_ras=None, seeds_1000=None, view=None, image_id=None, lower=None, upper=None,
                   segment_name=None) -> Result:
    started = time.perf_counter()
    node = ctx.engine.find_volume(volume_id, volume_name)
    image = scene_nodes.image_of(node)
    seeds, seeds_ijk, warnings = points_to_ijk(ctx, node, image, seeds_ras, seeds_1000, view, image_id)
    parameters = GrowingParameters(method, lower, upper, multiplier, max_volume_ml)
    try:
        grown = grow_region(image, seeds_ijk.tolist(), parameters)
    except ValueError as error:
        raise ActionError("invalid_argument", str(error)) from error
    mask = grown.mask
    if not mask.any():
        raise ActionError("empty_result", "region growing selected nothing: check the seeds and intensity range")
    name = segment_name or "region"
    segmentation = scene_nodes.add_segmentation(ctx.engine.app, f"{node.GetName()} {name}", node,
                                                mask.astype(np.int16), {1: name}, "segment_region")
    data = operator_data(
        {"volume_id": node.GetID(), "volume_name": node.GetName()},
        {"seeds_ras": np.round(seeds, 3).tolist(), "seeds_ijk": seeds_ijk.tolist(), **parameters.__dict__},
        {"segmentation_id": segmentation.GetID(), "segmentation_name": segmentation.GetName(), "stop": grown.stop,
         "intensity_range": [round(grown.lower, 3), round(grown.upper, 3)]},
        started,
        warnings,
        segments=segment_statistics(image, mask.astype(np.int16), {1: name}),
    )
    if grown.stop == "leak":
        add_warning(data, "region_leaked", "growth passed through a narrow contact into neighbouring tissue and was "
                                           "cut there: check the outline, or seed elsewhere")
    elif grown.stop == "drift":
        add_warning(data, "region_drifted", "growth began adding tissue of a different intensity than under the seeds "
                                            "and was cut there: check the outline, or seed elsewhere")
    elif grown.stop == "volume_cap":
        add_warning(data, "region_capped", f"growth reached max_volume_ml ({max_volume_ml:g} mL) and was stopped: "
                                           "the range probably covers neighbouring tissue")
    return render(ctx, target_views(ctx, None), size, data)


# ----------------------------------------------------------------------------------------- quantification
@OPERATORS.action(
    "quantify", "operator",
    "Statistics of a segment (or a box ROI from draw_roi) on any loaded volume in the same space: volume (ml), "
    "mean, max, SUVmax/SUVmean for PET with decay-corrected DICOM units, centroid, bounding box, longest 3-D "
    "diameter and the RANO longest axial diameter x perpendicular product.",
    {"segmentation_name": {"type": "string"}, "segment_name": {"type": "string"},
     "roi_evidence_id": {"type": "string", "description": "evidence id of a box ROI"}, **VOLUME},
    tracks=TRACKS,
    oneOf=[{"required": ["segmentation_name"]}, {"required": ["roi_evidence_id"]}],
)
def quantify(ctx, segmentation_name=None, segment_name=None, roi_evidence_id=None, volume_id=None,
             volume_name=None) -> Result:
    started = time.perf_counter()
    if segmentation_name is not None:
        segmentation = scene_nodes.find_segmentation(ctx.engine.scene, segmentation_name)
        source_id = segmentation.GetAttribute(scene_nodes.SOURCE_VOLUME)
        source = ctx.engine.scene.GetNodeByID(source_id) if source_id else None
        target = ctx.engine.find_volume(volume_id, volume_name) if volume_id or volume_name else source
        if target is None:
            raise ActionError("invalid_argument", "name the volume to measure (volume_name or volume_id)")
        warnings = region_space_warnings(ctx, source, target, f"{segmentation.GetName()} was made on")
        segment_id = scene_nodes.find_segment(segmentation, segment_name)
        mask = scene_nodes.segment_mask(ctx.engine.app, segmentation, segment_id, target)
        region = {"segmentation_id": segmentation.GetID(), "segment_id": segment_id,
                  "segment": segmentation.GetSegmentation().GetSegment(segment_id).GetName()}
    else:
        if segment_name is not None:
            raise ActionError("invalid_argument", "segment_name goes with segmentation_name")
        target = ctx.engine.find_volume(volume_id, volume_name)
        mask, region, drawn_on = roi_mask(ctx, roi_evidence_id, target)
        warnings = region_space_warnings(ctx, drawn_on, target, f"ROI {roi_evidence_id} was drawn on")
    image = scene_nodes.image_of(target)
    if not mask.any():
        raise ActionError("empty_region", f"the region contains no voxel of {target.GetName()}")
    calibration, suv_note = pet_calibration(target)
    stats = region_statistics(image, mask, calibration.factor if calibration else None)
    data = operator_data({"volume_id": target.GetID(), "volume_name": target.GetName(), **region},
                         {"suv": calibration.to_json() if calibration else None}, {}, started, warnings,
                         statistics=stats.to_json())
    if suv_note:
        data["suv_unavailable"] = suv_note
    return Result(ok=True, data=data)


# ------------------------------------------------------------------------------------------------ DICOM SEG
@OPERATORS.action(
    "export_dicom_seg", "operator",
    "Export a segmentation as a DICOM SEG object referencing the DICOM series it was made on.",
    {"segmentation_name": {"type": "string"},
     "segment_names": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
    required=["segmentation_name"],
    tracks=TRACKS,
)
def export_dicom_seg(ctx, segmentation_name, segment_names=None) -> Result:
    started = time.perf_counter()
    require("dicom_seg")
    from .dicom_seg import DicomSegError, Segment, export_seg  # highdicom: imported where used

    if ctx.artifacts_dir is None:
        raise ActionError("no_artifacts_dir", "this session has no artifacts directory to write to")
    segmentation = scene_nodes.find_segmentation(ctx.engine.scene, segmentation_name)
    source = ctx.engine.scene.GetNodeByID(segmentation.GetAttribute(scene_nodes.SOURCE_VOLUME) or "")
    files = (source.GetAttribute("DICOM.instanceFiles") or "").split("|") if source is not None else [""]
    if not files[0]:
        raise ActionError("not_dicom", f"{segmentation.GetName()} was not made on a DICOM series")
    try:
        datasets = [pydicom.dcmread(path, stop_before_pixels=True) for path in files]
    except (OSError, pydicom.errors.InvalidDicomError) as error:
        raise ActionError("source_unreadable", f"the source DICOM series of {segmentation.GetName()} can no "
                                               f"longer be read: {error}") from error
    ids = [scene_nodes.find_segment(segmentation, name) for name in segment_names] if segment_names else \
        scene_nodes.segment_ids(segmentation)
    content = segmentation.GetSegmentation()
    operator = segmentation.GetAttribute(scene_nodes.OPERATOR) or ""
    segments = [
        Segment(content.GetSegment(sid).GetName(), scene_nodes.segment_mask(ctx.engine.app, segmentation, sid, source),
                "AUTOMATIC" if operator == "vista3d_segment" else "SEMIAUTOMATIC",
                "VISTA3D" if operator == "vista3d_segment" else "MedOpenClaw region growing",
                "ArtificialIntelligence" if operator == "vista3d_segment" else "NeighborhoodAnalysis")
        for sid in ids
    ]
    directory = Path(ctx.artifacts_dir)
    directory.mkdir(parents=True, exist_ok=True)
    path = fresh_path(directory, _safe(segmentation.GetName()), ".seg.dcm")
    try:
        seg = export_seg(segments, scene_nodes.image_of(source, world=False), datasets, path)
    except DicomSegError as error:
        raise ActionError("dicom_seg_failed", str(error)) from error
    digest = sha256_file(path)
    result = Result(ok=True, data=operator_data(
        {"segmentation_id": segmentation.GetID(), "source_volume_id": source.GetID()},
        {"segments": [segment.label for segment in segments]},
        {"path": str(path), "sha256": digest, "sop_instance_uid": str(seg.SOPInstanceUID),
         "referenced_series_uid": str(datasets[0].SeriesInstanceUID)},
        started,
    ))
    result.artifacts.append({"kind": "dicom_seg", "path": str(path), "sha256": digest})
    return result


@OPERATORS.action(
    "import_dicom_seg", "operator",
    "Load a DICOM SEG file as a segmentation on the volume whose grid it was made on.",
    {"path": {"type": "string", "description": "a SEG file under a data root or this session's artifacts"},
     **VOLUME, "size": SIZE},
    required=["path"],
    tracks=TRACKS,
    anyOf=VOLUME_GIVEN,
)
def import_dicom_seg(ctx, path, size: int, volume_id=None, volume_name=None) -> Result:
    started = time.perf_counter()
    require("dicom_seg")
    from .dicom_seg import DicomSegError, import_seg  # highdicom: imported where used

    resolved = _readable_path(ctx, path)
    node = ctx.engine.find_volume(volume_id, volume_name)
    try:
        segments = import_seg(resolved, scene_nodes.image_of(node, world=False))
    except DicomSegError as error:
        raise ActionError("dicom_seg_failed", str(error)) from error
    except (OSError, ValueError, AttributeError, KeyError, pydicom.errors.InvalidDicomError) as error:  # not a SEG
        raise ActionError("unreadable_dicom", f"{resolved.name} is not a readable DICOM SEG: {error}") from error
    labelmap = np.zeros(node.GetImageData().GetDimensions()[::-1], np.int16)
    names = {}
    for value, (label, mask) in enumerate(segments, start=1):
        if (labelmap[mask] != 0).any():
            raise ActionError("overlapping_segments", "the SEG has overlapping segments; import them separately")
        labelmap[mask] = value
        names[value] = label
    segmentation = scene_nodes.add_segmentation(ctx.engine.app, f"{node.GetName()} SEG", node, labelmap, names,
                                                "import_dicom_seg")
    data = operator_data({"path": str(resolved), "sha256": sha256_file(resolved), "volume_id": node.GetID()}, {},
                         {"segmentation_id": segmentation.GetID(), "segmentation_name": segmentation.GetName()},
                         started, segments=segment_statistics(scene_nodes.image_of(node), labelmap, names))
    return render(ctx, target_views(ctx, None), size, data)


def _readable_path(ctx, path: str) -> Path:
    """A file under the data roots or this session's own artifact folder (e.g. a SEG it exported)."""
    extra = (ctx.artifacts_dir,) if ctx.artifacts_dir is not None else ()
    real = ctx.policy.data_roots.resolve(path, extra_roots=extra)
    if not real.is_file():
        raise ActionError("not_a_file", f"{Path(real).name} is not a file")
    return real


def _safe(name: str) -> str:
    return "".join(character if character.isalnum() or character in "-_" else "_" for character in name)[:48]

"""The operators' bridge to the MRML scene: reading volumes as arrays, adding result nodes that carry their
provenance as node attributes, and rebuilding the artifact graph from those attributes.

Provenance lives on the nodes themselves (not in a side table) so a rolled-back action, a saved scene or the
3D Slicer GUI all see exactly the links the graph reports.
"""

from __future__ import annotations

import numpy as np

# VTK's own modules, not ``import vtk`` (all of VTK: see viewer/geometry.py)
from vtkmodules.util import numpy_support
from vtkmodules.vtkCommonCore import vtkStringArray
from vtkmodules.vtkCommonMath import vtkMatrix4x4

from ..core.result import ActionError
from ..viewer.geometry import VIEWS, ijk_to_ras, numpy_to_vtk_matrix, vtk_to_numpy_matrix
from ..viewer.loading import set_node_image
from .artifacts import ArtifactGraph, SegmentationArtifact, TransformArtifact, VolumeArtifact, grid_key
from .image import ImageVolume

PREFIX = "MedOpenClaw."
OPERATOR = PREFIX + "operator"
FIXED = PREFIX + "fixedVolumeID"
MOVING = PREFIX + "movingVolumeID"
TRANSFORM_TYPE = PREFIX + "transformType"
DERIVED_FROM = PREFIX + "derivedFromVolumeID"
VIA_TRANSFORM = PREFIX + "viaTransformID"
REFERENCE = PREFIX + "referenceVolumeID"
SOURCE_VOLUME = PREFIX + "sourceVolumeID"
DISPLAY_OF = PREFIX + "displayOfSegmentationID"
FRAME = PREFIX + "frameOfReference"  # set by a case package to declare volumes acquired in one space
DICOM_FRAME = "DICOM.FrameOfReferenceUID"
LABEL_COLORS = "vtkMRMLColorTableNodeLabels"


def parent_to_world(node) -> np.ndarray:
    """The linear transform from the node's own RAS to world RAS (identity when it has no parent transform)."""
    parent = node.GetParentTransformNode()
    if parent is None:
        return np.eye(4)
    if not parent.IsLinear():
        raise ActionError("unsupported_transform", f"{node.GetName()} is under a non-linear transform")
    matrix = vtkMatrix4x4()
    parent.GetMatrixTransformToWorld(matrix)
    return vtk_to_numpy_matrix(matrix)


def image_of(node, world: bool = True) -> ImageVolume:
    """The node's voxels with IJK->world RAS (``world=False``: ignoring its parent transform)."""
    matrix = ijk_to_ras(node)
    if world:
        matrix = parent_to_world(node) @ matrix
    metadata = {"id": node.GetID(), "name": node.GetName(), "modality": node.GetAttribute("DICOM.Modality") or None}
    return ImageVolume(_array(node).copy(), matrix, metadata)


def _array(node) -> np.ndarray:
    image = node.GetImageData()
    dims = image.GetDimensions()
    return numpy_support.vtk_to_numpy(image.GetPointData().GetScalars()).reshape(dims[::-1])


def unique_name(scene, base: str) -> str:
    name, index = base, 1
    while scene.GetFirstNodeByName(name) is not None:
        index += 1
        name = f"{base} {index}"
    return name


def add_volume(scene, name: str, image: ImageVolume, attributes: dict[str, str]):
    node = scene.AddNewNodeByClass("vtkMRMLScalarVolumeNode", unique_name(scene, name))
    set_node_image(node, image.array, image.ijk_to_ras)
    node.CreateDefaultDisplayNodes()
    node.GetDisplayNode().SetAndObserveColorNodeID("vtkMRMLColorTableNodeGrey")
    node.GetDisplayNode().AutoWindowLevelOn()
    _set_attributes(node, attributes)
    return node


def add_transform(scene, name: str, matrix_ras: np.ndarray, attributes: dict[str, str]):
    node = scene.AddNewNodeByClass("vtkMRMLLinearTransformNode", unique_name(scene, name))
    node.SetMatrixTransformToParent(numpy_to_vtk_matrix(np.asarray(matrix_ras, dtype=float)))
    _set_attributes(node, attributes)
    return node


def transform_matrix(node) -> np.ndarray:
    matrix = vtkMatrix4x4()
    node.GetMatrixTransformToParent(matrix)
    return vtk_to_numpy_matrix(matrix)


def add_segmentation(app, name: str, source, labelmap: np.ndarray, names: dict[int, str], operator: str):
    """A segmentation node bound to ``source`` (reference geometry + provenance), one segment per label value,
    shown as the label layer of every view so renders include it."""
    scene = app.scene
    temporary = scene.AddNewNodeByClass("vtkMRMLLabelMapVolumeNode", "__medopenclaw_import__")
    try:
        set_node_image(temporary, labelmap.astype(np.int16), ijk_to_ras(source))
        segmentation = scene.AddNewNodeByClass("vtkMRMLSegmentationNode", unique_name(scene, name))
        segmentation.SetReferenceImageGeometryParameterFromVolumeNode(source)
        if not app.segmentations_logic.ImportLabelmapToSegmentationNode(temporary, segmentation):
            raise ActionError("internal_error", "Slicer could not import the label map into a segmentation")
    finally:
        scene.RemoveNode(temporary)
    content = segmentation.GetSegmentation()
    for index in range(content.GetNumberOfSegments()):
        segment = content.GetSegment(content.GetNthSegmentID(index))
        segment.SetName(names.get(segment.GetLabelValue(), segment.GetName()))
    segmentation.CreateDefaultDisplayNodes()
    if source.GetParentTransformNode() is not None:
        segmentation.SetAndObserveTransformNodeID(source.GetParentTransformNode().GetID())
    _set_attributes(segmentation, {SOURCE_VOLUME: source.GetID(), OPERATOR: operator})
    _show_as_label_layer(app, segmentation, source, labelmap)
    return segmentation


def _show_as_label_layer(app, segmentation, source, labelmap: np.ndarray) -> None:
    scene = app.scene
    name = unique_name(scene, f"{segmentation.GetName()} labels")
    display = scene.AddNewNodeByClass("vtkMRMLLabelMapVolumeNode", name)
    set_node_image(display, labelmap.astype(np.int16), ijk_to_ras(source))
    display.CreateDefaultDisplayNodes()
    display.GetDisplayNode().SetAndObserveColorNodeID(LABEL_COLORS)
    if source.GetParentTransformNode() is not None:
        display.SetAndObserveTransformNodeID(source.GetParentTransformNode().GetID())
    _set_attributes(display, {DISPLAY_OF: segmentation.GetID()})
    for view in VIEWS:
        app.slice_logics[view].GetSliceCompositeNode().SetLabelVolumeID(display.GetID())


def segment_ids(segmentation) -> list[str]:
    content = segmentation.GetSegmentation()
    return [content.GetNthSegmentID(index) for index in range(content.GetNumberOfSegments())]


def find_segment(segmentation, segment: str | None) -> str:
    """A segment id by id or (case-insensitive) name; the only segment when ``segment`` is omitted."""
    content = segmentation.GetSegmentation()
    ids = segment_ids(segmentation)
    if segment is None:
        if len(ids) != 1:
            names = ", ".join(content.GetSegment(sid).GetName() for sid in ids)
            raise ActionError("invalid_argument", f"{segmentation.GetName()} has segments {names}: name one")
        return ids[0]
    for sid in ids:
        if sid == segment or content.GetSegment(sid).GetName().lower() == segment.lower():
            return sid
    names = ", ".join(content.GetSegment(sid).GetName() for sid in ids) or "none"
    raise ActionError("segment_not_found", f"{segmentation.GetName()} has no segment {segment!r}; it has {names}")


def segment_mask(app, segmentation, segment_id: str, reference) -> np.ndarray:
    """The segment as a boolean ``[k, j, i]`` mask on ``reference``'s voxel grid."""
    scene = app.scene
    labelmap = scene.AddNewNodeByClass("vtkMRMLLabelMapVolumeNode", "__medopenclaw_export__")
    try:
        ids = vtkStringArray()
        ids.InsertNextValue(segment_id)
        if not app.segmentations_logic.ExportSegmentsToLabelmapNode(segmentation, ids, labelmap, reference):
            raise ActionError("internal_error", "Slicer could not export the segment")
        return _array(labelmap) > 0
    finally:
        scene.RemoveNode(labelmap)


def bound_overlays(scene, volume) -> list:
    """Segmentations made on ``volume`` and the label maps that display them: they must follow the volume when
    it is placed under a transform, or they would be drawn in the wrong place."""
    segmentations = [node for node in _nodes(scene, "vtkMRMLSegmentationNode")
                     if node.GetAttribute(SOURCE_VOLUME) == volume.GetID()]
    ids = {node.GetID() for node in segmentations}
    labels = [node for node in _nodes(scene, "vtkMRMLLabelMapVolumeNode") if node.GetAttribute(DISPLAY_OF) in ids]
    return segmentations + labels


def find_segmentation(scene, ref: str):
    for index in range(scene.GetNumberOfNodesByClass("vtkMRMLSegmentationNode")):
        node = scene.GetNthNodeByClass(index, "vtkMRMLSegmentationNode")
        if ref in (node.GetID(), node.GetName()):
            return node
    names = ", ".join(
        scene.GetNthNodeByClass(i, "vtkMRMLSegmentationNode").GetName()
        for i in range(scene.GetNumberOfNodesByClass("vtkMRMLSegmentationNode"))
    )
    raise ActionError("segmentation_not_found", f"no segmentation {ref!r}; available: {names or 'none'}")


def find_transform(scene, ref: str):
    nodes = _nodes(scene, "vtkMRMLLinearTransformNode")
    for node in nodes:
        if ref in (node.GetID(), node.GetName()):
            return node
    names = ", ".join(node.GetName() for node in nodes)
    raise ActionError("transform_not_found", f"no transform {ref!r}; available: {names or 'none'}")


def artifact_graph(engine) -> ArtifactGraph:
    """The graph of the scene's volumes, linear transforms and segmentations, from their attributes."""
    scene = engine.scene
    volumes = []
    for node in engine.volume_nodes():
        parent = node.GetParentTransformNode()
        volumes.append(
            VolumeArtifact(
                id=node.GetID(),
                name=node.GetName(),
                grid_key=grid_key(node.GetImageData().GetDimensions(), ijk_to_ras(node)),
                frame=node.GetAttribute(FRAME) or node.GetAttribute(DICOM_FRAME) or None,
                parent_transform=parent.GetID() if parent is not None else None,
                derived_from=node.GetAttribute(DERIVED_FROM),
                via_transform=node.GetAttribute(VIA_TRANSFORM),
                reference=node.GetAttribute(REFERENCE),
            )
        )
    transforms = [
        TransformArtifact(
            id=node.GetID(),
            name=node.GetName(),
            fixed=node.GetAttribute(FIXED),
            moving=node.GetAttribute(MOVING),
            transform_type=node.GetAttribute(TRANSFORM_TYPE),
        )
        for node in _nodes(scene, "vtkMRMLLinearTransformNode")
    ]
    segmentations = [
        SegmentationArtifact(
            node.GetID(), node.GetName(), node.GetAttribute(SOURCE_VOLUME), node.GetAttribute(OPERATOR)
        )
        for node in _nodes(scene, "vtkMRMLSegmentationNode")
    ]
    return ArtifactGraph(volumes, transforms, segmentations)


def _nodes(scene, class_name: str) -> list:
    """User-visible nodes of a class (slice views own hidden transform nodes that are not artifacts)."""
    nodes = [scene.GetNthNodeByClass(index, class_name) for index in range(scene.GetNumberOfNodesByClass(class_name))]
    return [node for node in nodes if not node.GetHideFromEditors()]


def _set_attributes(node, attributes: dict[str, str]) -> None:
    for key, value in attributes.items():
        node.SetAttribute(key, str(value))

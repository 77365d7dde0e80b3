"""The radiology viewer engine: volumes, slice views, window/level and fusion over a real MRML scene.

Handlers never touch VTK directly; they call this class, which keeps the scene in the states an agent can name
(active volume, canonical slice offsets, fields of view, fusion) and can snapshot and restore them so that a
failed action leaves nothing behind.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import slicer

# VTK's own modules, not ``import vtk`` (all of VTK: see viewer/geometry.py)
from vtkmodules.util import numpy_support

from ..core.result import ActionError
from .application import SlicerApplication
from .geometry import (
    CANONICAL_AXIS,
    VIEWS,
    lies_inside,
    numpy_to_vtk_matrix,
    spacing_along,
    square_side,
    voxel_center_bounds,
    vtk_to_numpy_matrix,
)
from .image_geometry import ImageLog, SliceImageGeometry
from .loading import VolumeSource, check_session_size, load_sources

LAYOUTS = {
    "conventional": (slicer.vtkMRMLLayoutNode.SlicerLayoutConventionalView, VIEWS),
    "four_up": (slicer.vtkMRMLLayoutNode.SlicerLayoutFourUpView, VIEWS),
    "three_over_three": (slicer.vtkMRMLLayoutNode.SlicerLayoutThreeOverThreeView, VIEWS),
    "one_up_axial": (slicer.vtkMRMLLayoutNode.SlicerLayoutOneUpRedSliceView, ("axial",)),
    "one_up_sagittal": (slicer.vtkMRMLLayoutNode.SlicerLayoutOneUpYellowSliceView, ("sagittal",)),
    "one_up_coronal": (slicer.vtkMRMLLayoutNode.SlicerLayoutOneUpGreenSliceView, ("coronal",)),
}
FUSION_MODES = {"blend": 0, "reverse_blend": 1, "add": 2, "subtract": 3}
GREY_TABLES = ("vtkMRMLColorTableNodeGrey", "vtkMRMLColorTableNodeInvertedGrey")
MANAGED_CLASSES = (
    "vtkMRMLScalarVolumeNode",
    "vtkMRMLMarkupsNode",
    "vtkMRMLSegmentationNode",
    "vtkMRMLTransformNode",
)
DEFAULT_SIZE = 512


def _round(values, digits: int = 3):
    return [round(float(value), digits) for value in values]


@dataclass
class ViewCheckpoint:
    slice_to_ras: np.ndarray
    field_of_view: tuple
    dimensions: tuple
    background: str | None
    foreground: str | None
    label: str | None
    foreground_opacity: float
    compositing: int


class ViewerEngine:
    """Scene-level operations addressed by canonical view names and volume names/ids."""

    def __init__(self, app: SlicerApplication | None = None):
        self.app = app or SlicerApplication.create()
        self.scene = self.app.scene
        self.layout = "conventional"
        self.default_step_mm: float | None = None
        self.images = ImageLog()  # geometry of every slice image rendered for this session
        # False while a trace is replayed: images keep their geometry (what later 0..999 arguments are read on)
        # but skip the reslice, which is most of a replay's time; see replay.images_without_pixels
        self.render_pixels = True

    # ----------------------------------------------------------------- volumes
    def logic(self, view: str):
        if view not in VIEWS:
            raise ActionError("invalid_view", f"view must be one of {', '.join(VIEWS)}, got {view!r}")
        return self.app.slice_logics[view]

    def volume_nodes(self) -> list:
        nodes = [
            self.scene.GetNthNodeByClass(index, "vtkMRMLScalarVolumeNode")
            for index in range(self.scene.GetNumberOfNodesByClass("vtkMRMLScalarVolumeNode"))
        ]
        return [node for node in nodes if not node.IsA("vtkMRMLLabelMapVolumeNode") and node.GetImageData()]

    def open(self, sources: list[VolumeSource], keep_loaded: bool = False) -> tuple[list, list[str]]:
        """Load the sources (see :func:`discover_sources`) and show the first; returns the nodes and the
        loading warnings (a source that cannot be read is one of them, see :func:`load_sources`).

        A new case is a clean scene: unless ``keep_loaded``, the volumes, markups, segmentations and transforms
        already in the scene are removed -- after the new volumes loaded, so a case that fails to open leaves
        the previous one in place."""
        previous = set() if keep_loaded else self.managed_node_ids()
        check_session_size(self.app, sources, keep_loaded)
        nodes, warnings = load_sources(self.app, sources, avoid_names=keep_loaded)
        for node_id in previous:
            node = self.scene.GetNodeByID(node_id)
            if node is not None:
                self.scene.RemoveNode(node)
        if nodes:
            self.show_volume(nodes[0])
        return nodes, warnings

    def find_volume(self, volume_id: str | None = None, volume_name: str | None = None, required: bool = True):
        """The one volume resolver of every action (the convention of :mod:`MedOpenClawLib.core.arguments`): the active
        volume when neither is given; ``volume_id`` a node id; ``volume_name`` a name (exact, then case-insensitive)
        or, failing that, a node id (a ``<role>_volume_ref`` is resolved as a ``volume_name``)."""
        if volume_id is None and volume_name is None:
            node = self.active_volume()
            if node is None and required:
                raise ActionError("no_volume", "no volume is loaded; call open_case first")
            return node
        for node in self.volume_nodes():
            if volume_id is not None and node.GetID() == volume_id:
                return node
        if volume_name is not None:
            nodes = self.volume_nodes()
            for matcher in (lambda n: n.GetName() == volume_name, lambda n: n.GetName().lower() == volume_name.lower()):
                matches = [node for node in nodes if matcher(node)]
                if matches:
                    return matches[0]
            for node in nodes:
                if node.GetID() == volume_name:
                    return node
        names = ", ".join(node.GetName() for node in self.volume_nodes()) or "none loaded"
        raise ActionError("volume_not_found", f"no volume {volume_id or volume_name!r}; available: {names}")

    def active_volume(self):
        volume_id = self.app.slice_logics["axial"].GetSliceCompositeNode().GetBackgroundVolumeID()
        return self.scene.GetNodeByID(volume_id) if volume_id else None

    def show_volume(self, node) -> None:
        """Make ``node`` the background of every view and recover the standard views around it."""
        for view in VIEWS:
            composite = self.logic(view).GetSliceCompositeNode()
            composite.SetBackgroundVolumeID(node.GetID())
            if composite.GetForegroundVolumeID() == node.GetID():
                composite.SetForegroundVolumeID(None)
        self.recover_standard_views(node)

    def recover_standard_views(self, node=None) -> None:
        """Standard orientations, fitted to the volume, each view through the volume centre."""
        node = node or self.find_volume()
        center = voxel_center_bounds(node).mean(axis=1)
        for view in VIEWS:
            logic = self.logic(view)
            slice_node = logic.GetSliceNode()
            slice_node.SetOrientation(slice_node.GetDefaultOrientation())
            if not self.app.gui_views:  # a GUI view keeps its widget's shape; FitSliceToAll fits it
                self._ensure_square(slice_node, DEFAULT_SIZE)
            logic.FitSliceToAll()
            self.set_offset(view, float(center[CANONICAL_AXIS[view]]), clamp=True)

    # ----------------------------------------------------------------- slices
    def _sign(self, view: str) -> float:
        """+1 when the slice normal points along the canonical axis, -1 when against it."""
        normal = vtk_to_numpy_matrix(self.logic(view).GetSliceNode().GetSliceToRAS())[:3, 2]
        return 1.0 if normal[CANONICAL_AXIS[view]] >= 0 else -1.0

    def offset(self, view: str) -> float:
        return self._sign(view) * self.logic(view).GetSliceOffset()

    def offset_range(self, view: str, node=None) -> tuple[float, float, float]:
        """(min, max, step) of canonical offsets whose plane passes through voxel centres of the volume."""
        node = node or self.find_volume()
        bounds = voxel_center_bounds(node)[CANONICAL_AXIS[view]]
        return float(bounds[0]), float(bounds[1]), spacing_along(node, CANONICAL_AXIS[view])

    def set_offset(self, view: str, offset_mm: float, clamp: bool = False) -> float:
        low, high, step = self.offset_range(view)
        tolerance = step / 2.0
        if not clamp and not (low - tolerance <= offset_mm <= high + tolerance):
            raise ActionError(
                "out_of_range",
                f"{view} offset {offset_mm:.2f} mm is outside the volume: valid range {low:.2f} to {high:.2f} mm",
            )
        offset_mm = min(max(offset_mm, low), high) if clamp else offset_mm
        self.logic(view).SetSliceOffset(self._sign(view) * offset_mm)
        return self.offset(view)

    def jump(self, ras: list[float]) -> None:
        """Centre all three views on a RAS point (each view's offset becomes that point's coordinate)."""
        node = self.find_volume()
        if not lies_inside(node, ras):
            bounds = voxel_center_bounds(node)
            raise ActionError(
                "outside_volume",
                f"RAS {list(ras)} lies outside {node.GetName()} (R {bounds[0, 0]:.1f}..{bounds[0, 1]:.1f}, "
                f"A {bounds[1, 0]:.1f}..{bounds[1, 1]:.1f}, S {bounds[2, 0]:.1f}..{bounds[2, 1]:.1f})",
            )
        for view in VIEWS:
            self.logic(view).GetSliceNode().JumpSliceByCentering(*[float(value) for value in ras])

    def zoom(self, view: str, factor: float, center_ras: np.ndarray | None = None) -> str | None:
        """Scale the field of view by 1/``factor`` within :meth:`field_of_view_limits` (repeated zooms would
        otherwise reach 0 or Infinity); returns a note when the limit cut the zoom short."""
        slice_node = self.logic(view).GetSliceNode()
        fov = slice_node.GetFieldOfView()
        smallest, largest = self.field_of_view_limits(self.find_volume())
        applied = min(max(factor, max(fov[0], fov[1]) / largest), min(fov[0], fov[1]) / smallest)
        slice_node.SetFieldOfView(fov[0] / applied, fov[1] / applied, fov[2])
        if center_ras is not None:
            self._center_in_plane(slice_node, center_ras)
        if abs(applied - factor) > 1e-9 * factor:
            return "zoom-in limit reached" if factor > applied else "zoom-out limit reached"
        return None

    @staticmethod
    def field_of_view_limits(node) -> tuple[float, float]:
        """Narrowest and widest field of view (mm): 4 voxels across, and 4 times the volume's diagonal."""
        bounds = voxel_center_bounds(node)
        spacings = [spacing_along(node, axis) for axis in range(3)]
        diagonal = float(np.linalg.norm(bounds[:, 1] - bounds[:, 0])) + max(spacings)
        return 4.0 * min(spacings), 4.0 * diagonal

    def fit(self, view: str) -> None:
        offset = self.offset(view)
        self.logic(view).FitSliceToAll()
        self.set_offset(view, offset, clamp=True)

    @staticmethod
    def _center_in_plane(slice_node, ras: np.ndarray) -> None:
        """Pan so ``ras`` is at the view centre without changing the slice offset."""
        slice_to_ras = vtk_to_numpy_matrix(slice_node.GetSliceToRAS())
        normal = slice_to_ras[:3, 2]
        origin = slice_to_ras[:3, 3]
        in_plane = np.asarray(ras, dtype=float) - np.dot(np.asarray(ras) - origin, normal) * normal
        slice_to_ras[:3, 3] = in_plane
        slice_node.GetSliceToRAS().DeepCopy(numpy_to_vtk_matrix(slice_to_ras))
        slice_node.UpdateMatrices()

    @staticmethod
    def _ensure_square(slice_node, size: int) -> None:
        """Views are square images of ``size`` px; keep the mm-per-pixel scale when the size changes."""
        dims = slice_node.GetDimensions()
        if dims[0] == size and dims[1] == size:
            return
        side = square_side(slice_node.GetFieldOfView())
        slice_node.SetDimensions(size, size, 1)
        slice_node.SetFieldOfView(side, side, slice_node.GetFieldOfView()[2])

    def render_slice(self, view: str, size: int) -> tuple[np.ndarray | None, SliceImageGeometry]:
        """The view as a ``size`` x ``size`` image: the slice logic's blended layers (background, foreground,
        label) as an (H, W, 4) uint8 array (None unless :attr:`render_pixels`), and the geometry it was rendered
        with.

        The slice node is squared for the reslice and then given back its own dimensions and field of view:
        inside the GUI those belong to the view widget, and an agent's observation must not reshape the
        clinician's view.
        """
        slice_node = self.logic(view).GetSliceNode()
        dimensions, field_of_view = tuple(slice_node.GetDimensions()), tuple(slice_node.GetFieldOfView())
        self._ensure_square(slice_node, size)
        try:
            rgba = None
            width, height, _ = slice_node.GetDimensions()  # the reslice's output size
            if self.render_pixels:
                producer = self.logic(view).GetImageDataConnection().GetProducer()
                producer.Update()
                image = producer.GetOutputDataObject(0)
                width, height, _ = image.GetDimensions()
                pixels = numpy_support.vtk_to_numpy(image.GetPointData().GetScalars())
                # copied (row-flipped to a top-left origin, a fast contiguous copy): the buffer belongs to the VTK
                # pipeline and is reused or freed on its next update
                rgba = np.flipud(pixels.reshape(height, width, 4)).copy()
            geometry = SliceImageGeometry(
                image_id=self.images.next_id(),
                view=view,
                width=width,
                height=height,
                xy_to_ras=vtk_to_numpy_matrix(slice_node.GetXYToRAS()),
                slice_to_ras=vtk_to_numpy_matrix(slice_node.GetSliceToRAS()),
                field_of_view_mm=tuple(slice_node.GetFieldOfView()),
                slice_offset_mm=self.offset(view),
            )
        finally:
            if tuple(slice_node.GetDimensions()) != dimensions:
                slice_node.SetDimensions(*dimensions)
                slice_node.SetFieldOfView(*field_of_view)
        return rgba, geometry

    def view_changes(self, geometry: SliceImageGeometry) -> list[str]:
        """How the live view differs from the one ``geometry`` was rendered from (empty when it does not)."""
        slice_node = self.logic(geometry.view).GetSliceNode()
        dims, fov = slice_node.GetDimensions(), slice_node.GetFieldOfView()
        side = square_side(fov) if (dims[0], dims[1]) != (geometry.width, geometry.height) else None
        live_fov = (side, side, fov[2]) if side is not None else tuple(fov)
        return geometry.changes_since(vtk_to_numpy_matrix(slice_node.GetSliceToRAS()), live_fov,
                                      self.offset(geometry.view))

    def shows_only_grey(self, view: str) -> bool:
        """True when the view blends nothing but a grey-scale background, so its pixels have R = G = B."""
        composite = self.logic(view).GetSliceCompositeNode()
        if composite.GetForegroundVolumeID() or composite.GetLabelVolumeID():
            return False
        background = self.scene.GetNodeByID(composite.GetBackgroundVolumeID() or "")
        display = background.GetDisplayNode() if background is not None else None
        return display is None or display.GetColorNodeID() in GREY_TABLES

    # ------------------------------------------------------------ display
    def window_level(self, node) -> dict:
        display = node.GetDisplayNode()
        return {
            "window": round(display.GetWindow(), 3),
            "level": round(display.GetLevel(), 3),
            "auto": bool(display.GetAutoWindowLevel()),
            "color": display.GetColorNodeID(),
        }

    def set_window_level(self, node, window: float | None, level: float | None, auto: bool = False) -> None:
        display = node.GetDisplayNode()
        if auto:
            display.AutoWindowLevelOn()
            return
        if window is not None and window <= 0:
            raise ActionError("invalid_argument", "window must be positive")
        display.AutoWindowLevelOff()
        display.SetWindowLevel(
            display.GetWindow() if window is None else float(window),
            display.GetLevel() if level is None else float(level),
        )

    def set_color_table(self, node, color_node_id: str) -> None:
        if self.scene.GetNodeByID(color_node_id) is None:
            raise ActionError("invalid_argument", f"color table {color_node_id} is not available")
        node.GetDisplayNode().SetAndObserveColorNodeID(color_node_id)

    def voxels(self, node) -> np.ndarray:
        return slicer.util.arrayFromVolume(node)

    def set_fusion(self, background, foreground, opacity: float, mode: str) -> None:
        for view in VIEWS:
            composite = self.logic(view).GetSliceCompositeNode()
            composite.SetBackgroundVolumeID(background.GetID())
            composite.SetForegroundVolumeID(foreground.GetID() if foreground is not None else None)
            composite.SetForegroundOpacity(float(opacity))
            composite.SetCompositing(FUSION_MODES[mode])

    def set_layout(self, layout: str) -> None:
        if layout not in LAYOUTS:
            raise ActionError("invalid_argument", f"layout must be one of {', '.join(LAYOUTS)}")
        if self.app.gui_views:  # only the GUI's layout manager knows the layout descriptions
            self.scene.GetFirstNodeByClass("vtkMRMLLayoutNode").SetViewArrangement(LAYOUTS[layout][0])
        self.layout = layout

    def visible_views(self) -> tuple[str, ...]:
        return LAYOUTS[self.layout][1]

    # ------------------------------------------------------------------ state
    def volume_summary(self, node) -> dict:
        dims = node.GetImageData().GetDimensions()
        summary = {
            "id": node.GetID(),
            "name": node.GetName(),
            "dimensions": list(dims),
            "spacing_mm": _round(node.GetSpacing()),
            "ras_bounds": [_round(row) for row in voxel_center_bounds(node)],
            "modality": node.GetAttribute("DICOM.Modality") or None,
        }
        summary.update(self.window_level(node))
        return summary

    def view_state(self, view: str) -> dict:
        logic = self.logic(view)
        slice_node = logic.GetSliceNode()
        composite = logic.GetSliceCompositeNode()
        slice_to_ras = vtk_to_numpy_matrix(slice_node.GetSliceToRAS())

        def name_of(node_id):
            node = self.scene.GetNodeByID(node_id) if node_id else None
            return node.GetName() if node else None

        return {
            "offset_mm": round(self.offset(view), 3),
            "orientation": slice_node.GetOrientation(),
            "field_of_view_mm": _round(slice_node.GetFieldOfView()[:2]),
            "center_ras": _round(slice_to_ras[:3, 3]),
            "size": list(slice_node.GetDimensions()[:2]),
            "background": name_of(composite.GetBackgroundVolumeID()),
            "foreground": name_of(composite.GetForegroundVolumeID()),
            "foreground_opacity": round(composite.GetForegroundOpacity(), 3),
            "label": name_of(composite.GetLabelVolumeID()),
        }

    def state(self) -> dict:
        active = self.active_volume()
        return {
            "active_volume": active.GetName() if active else None,
            "layout": self.layout,
            "views": {view: self.view_state(view) for view in VIEWS},
            "volumes": [self.volume_summary(node) for node in self.volume_nodes()],
        }

    # ------------------------------------------------------------ rollback
    def managed_node_ids(self) -> set[str]:
        ids = set()
        for class_name in MANAGED_CLASSES:
            for index in range(self.scene.GetNumberOfNodesByClass(class_name)):
                ids.add(self.scene.GetNthNodeByClass(index, class_name).GetID())
        return ids

    def checkpoint(self) -> dict:
        views = {}
        for view in VIEWS:
            logic = self.logic(view)
            slice_node = logic.GetSliceNode()
            composite = logic.GetSliceCompositeNode()
            views[view] = ViewCheckpoint(
                vtk_to_numpy_matrix(slice_node.GetSliceToRAS()),
                tuple(slice_node.GetFieldOfView()),
                tuple(slice_node.GetDimensions()),
                composite.GetBackgroundVolumeID(),
                composite.GetForegroundVolumeID(),
                composite.GetLabelVolumeID(),
                composite.GetForegroundOpacity(),
                composite.GetCompositing(),
            )
        display = {node.GetID(): self.window_level(node) for node in self.volume_nodes()}
        nodes = self.managed_node_ids()
        transformable = [self.scene.GetNodeByID(node_id) for node_id in nodes]
        parents = {node.GetID(): node.GetTransformNodeID() for node in transformable
                   if node.IsA("vtkMRMLTransformableNode")}
        return {"views": views, "display": display, "parents": parents, "nodes": nodes, "layout": self.layout,
                "images": self.images.checkpoint()}

    def rollback(self, checkpoint: dict) -> None:
        for node_id in self.managed_node_ids() - checkpoint["nodes"]:
            node = self.scene.GetNodeByID(node_id)
            if node is not None:
                self.scene.RemoveNode(node)
        for view, saved in checkpoint["views"].items():
            logic = self.logic(view)
            slice_node = logic.GetSliceNode()
            composite = logic.GetSliceCompositeNode()
            slice_node.SetDimensions(*saved.dimensions)
            slice_node.SetFieldOfView(*saved.field_of_view)
            slice_node.GetSliceToRAS().DeepCopy(numpy_to_vtk_matrix(saved.slice_to_ras))
            slice_node.UpdateMatrices()
            composite.SetBackgroundVolumeID(saved.background)
            composite.SetForegroundVolumeID(saved.foreground)
            composite.SetLabelVolumeID(saved.label)
            composite.SetForegroundOpacity(saved.foreground_opacity)
            composite.SetCompositing(saved.compositing)
        for node_id, parent_id in checkpoint["parents"].items():
            node = self.scene.GetNodeByID(node_id)
            if node is not None and node.GetTransformNodeID() != parent_id:
                node.SetAndObserveTransformNodeID(parent_id)
        for node_id, wl in checkpoint["display"].items():
            node = self.scene.GetNodeByID(node_id)
            if node is None:
                continue
            display = node.GetDisplayNode()
            display.SetAndObserveColorNodeID(wl["color"])
            if wl["auto"]:
                display.AutoWindowLevelOn()
            else:
                display.AutoWindowLevelOff()
                display.SetWindowLevel(wl["window"], wl["level"])
        self.set_layout(checkpoint["layout"])
        self.images.rollback(checkpoint["images"])


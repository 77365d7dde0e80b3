"""Wiring of the Slicer logic classes the engine needs, headless (slicer-core) or bound to the running app.

Both variants expose the same attributes, so everything above this module runs unchanged in CI, in batch
workers and inside the 3D Slicer GUI.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import slicer

# VTK's own modules, not ``import vtk`` (all of VTK: see viewer/geometry.py)
from vtkmodules.vtkCommonCore import vtkCollection

# slicer-core ships no colour files; an empty <home>/<share>/ColorFiles keeps the Colors logic from warning
EMPTY_SLICER_HOME = Path(tempfile.gettempdir()) / "medopenclaw-slicer-home"
# canonical view name -> (Slicer slice-view name, orientation preset)
VIEW_NODES = {"axial": ("Red", "Axial"), "sagittal": ("Yellow", "Sagittal"), "coronal": ("Green", "Coronal")}


@dataclass
class SlicerApplication:
    scene: Any
    app_logic: Any
    color_logic: Any  # must outlive the scene: its destructor removes the default lookup tables
    volumes_logic: Any
    segmentations_logic: Any
    slice_logics: dict  # canonical view name -> vtkMRMLSliceLogic
    embedded: bool  # True inside the 3D Slicer app (its scene, modules and CLIs)
    gui_views: bool = False  # True when the slice logics belong to the layout manager's slice widgets

    @classmethod
    def headless(cls) -> SlicerApplication:
        """A fresh scene with the application, color, volumes and segmentations logics and three slice logics."""
        scene, app_logic, color_logic, volumes_logic, segmentations_logic = build_core_logics()
        slice_logics = build_slice_logics(scene, app_logic)
        return cls(scene, app_logic, color_logic, volumes_logic, segmentations_logic, slice_logics, embedded=False)

    @classmethod
    def running_app(cls) -> SlicerApplication:
        """Bind to the running 3D Slicer application: its scene and logics, and its Red/Yellow/Green slice views.

        ``Slicer --no-main-window`` (benchmark workers) has no layout manager -- qSlicerMainWindow creates it --
        so ``slicer.app.layoutManager()`` returns None; the slice logics are then built on the application's scene
        exactly as the headless engine builds them.
        """
        layout_manager = slicer.app.layoutManager()
        if layout_manager is not None:
            slice_logics = {
                view: layout_manager.sliceWidget(layout_name).sliceLogic()
                for view, (layout_name, _) in VIEW_NODES.items()
            }
        else:
            slice_logics = build_slice_logics(slicer.mrmlScene, slicer.app.applicationLogic())
        return cls(
            slicer.mrmlScene,
            slicer.app.applicationLogic(),
            slicer.modules.colors.logic(),
            slicer.modules.volumes.logic(),
            slicer.modules.segmentations.logic(),
            slice_logics,
            embedded=True,
            gui_views=layout_manager is not None,
        )

    def close(self) -> None:
        """Detach the logics from the scene, slice logics first.

        Left to garbage collection, the color logic's destructor removes the lookup tables while a half-destroyed
        slice logic still observes their display nodes, which crashes the process.
        """
        if self.gui_views or self.scene is None:
            return
        for logic in self.slice_logics.values():
            logic.SetMRMLScene(None)
            self.app_logic.GetSliceLogics().RemoveItem(logic)
        self.slice_logics = {}
        if not self.embedded:  # the application's own scene and logics stay
            for logic in (self.volumes_logic, self.color_logic):
                logic.SetMRMLScene(None)
            self.app_logic.SetMRMLScene(None)
        self.scene = None

    def __del__(self):
        self.close()

    @classmethod
    def create(cls) -> SlicerApplication:
        """Inside the Slicer application (with or without its main window) bind to it; else a headless scene."""
        if getattr(slicer, "app", None) is not None:
            return cls.running_app()
        return cls.headless()


def build_core_logics() -> tuple:
    """A scene with the application logic and the Colors, Volumes and Segmentations module logics, wired as the
    3D Slicer application wires them at start-up: (scene, app_logic, color, volumes, segmentations)."""
    scene = slicer.vtkMRMLScene()
    app_logic = slicer.vtkSlicerApplicationLogic()
    app_logic.SetMRMLScene(scene)
    app_logic.SetViewLogics(vtkCollection())

    # the Colors module logic adds the default lookup tables (Grey, Labels, PET-Heat, ...) to the scene and
    # reads optional colour files from <home>/<share>/ColorFiles
    (EMPTY_SLICER_HOME / "share" / "ColorFiles").mkdir(parents=True, exist_ok=True)
    app_logic.SetHomeDirectory(str(EMPTY_SLICER_HOME))
    app_logic.SetShareDirectory("share")
    color_logic = slicer.vtkSlicerColorLogic()
    color_logic.SetMRMLApplicationLogic(app_logic)
    color_logic.SetMRMLScene(scene)
    app_logic.SetModuleLogic("Colors", color_logic)

    volumes_logic = slicer.vtkSlicerVolumesLogic()
    volumes_logic.SetMRMLScene(scene)
    volumes_logic.SetMRMLApplicationLogic(app_logic)
    app_logic.SetModuleLogic("Volumes", volumes_logic)

    segmentations_logic = slicer.vtkSlicerSegmentationsModuleLogic()
    segmentations_logic.SetMRMLScene(scene)
    segmentations_logic.SetMRMLApplicationLogic(app_logic)
    app_logic.SetModuleLogic("Segmentations", segmentations_logic)
    return scene, app_logic, color_logic, volumes_logic, segmentations_logic


def build_slice_logics(scene, app_logic) -> dict:
    """Red/Yellow/Green slice nodes and logics on ``scene``, registered with ``app_logic`` (what Slicer's layout
    manager does for its slice widgets); an existing singleton slice node of the same layout name is reused."""
    if app_logic.GetSliceLogics() is None:  # null until a layout manager sets its collection (qSlicerApplication)
        app_logic.SetSliceLogics(vtkCollection())
    # radiological convention (patient right on screen left), Slicer's default
    slicer.vtkMRMLSliceNode.AddDefaultSliceOrientationPresets(scene, True)
    slice_logics = {}
    for view, (layout_name, orientation) in VIEW_NODES.items():
        slice_node = scene.GetSingletonNode(layout_name, "vtkMRMLSliceNode")
        if slice_node is None:
            slice_node = scene.CreateNodeByClass("vtkMRMLSliceNode")
            slice_node.UnRegister(None)
            slice_node.SetName(layout_name)
            slice_node.SetLayoutName(layout_name)
            slice_node.SetSingletonTag(layout_name)
            slice_node.SetDefaultOrientation(orientation)
            scene.AddNode(slice_node)
        slice_node.SetOrientation(orientation)
        logic = slicer.vtkMRMLSliceLogic()
        logic.SetMRMLApplicationLogic(app_logic)
        logic.SetMRMLScene(scene)
        logic.SetSliceNode(slice_node)
        app_logic.GetSliceLogics().AddItem(logic)
        slice_logics[view] = logic
    return slice_logics


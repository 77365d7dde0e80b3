"""A test double of the running 3D Slicer application, built on slicer-core's real MRML classes.

``install`` adds to the ``slicer`` module what the Slicer application adds at start-up (``slicer.app``,
``slicer.mrmlScene``, ``slicer.modules``, ``slicer.cli``). Every behaviour MedOpenClaw depends on is reproduced
from Slicer's sources, each cited where it is encoded:

- no layout manager without the main window (``Slicer --no-main-window``), and an application logic whose slice
  logic collection is null until a layout manager sets it;
- slice widgets whose resize calls ``vtkMRMLSliceLogic::ResizeSliceNode`` (slicer-core's real method);
- ``slicer.cli.runSync`` returning the CLI node whatever happened (``CompletedWithErrors`` with the error text,
  outputs not reloaded), and with ``update_display=True`` resetting the slice views to show the output.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import slicer

# VTK's own classes from their modules: ``import vtk`` loads every VTK module (half a second of CPU in each
# application double, and the launcher double starts one per worker)
from vtkmodules.util.misc import calldata_type
from vtkmodules.vtkCommonCore import VTK_OBJECT, vtkCollection, vtkCommand

from MedOpenClawLib.viewer.application import VIEW_NODES, build_core_logics
from MedOpenClawLib.viewer.geometry import numpy_to_vtk_matrix


class SliceController:
    """qMRMLSliceControllerWidget (Libs/MRML/Widgets/qMRMLSliceControllerWidget.cxx): the slice view calls
    ``setSliceViewSize`` on every resize, which does ``d->SliceLogic->ResizeSliceNode(newSize.width(),
    newSize.height())``. That is slicer-core's real vtkMRMLSliceLogic::ResizeSliceNode
    (Libs/MRML/Logic/vtkMRMLSliceLogic.cxx: new dimensions, the field of view stretched to keep the pixel size),
    after which Libs/MRML/Core/vtkMRMLSliceNode.cxx ``UpdateMatrices`` recomputes XYToRAS from them."""

    def __init__(self, logic):
        self._logic = logic

    def setSliceViewSize(self, size) -> None:  # noqa: N802 - Qt's name
        self._logic.ResizeSliceNode(float(size.width()), float(size.height()))


class SliceWidget:
    """qMRMLSliceWidget: a slice view with its own slice logic and controller."""

    def __init__(self, logic):
        self._logic = logic
        self._controller = SliceController(logic)

    def sliceLogic(self):  # noqa: N802 - Qt's name
        return self._logic

    def sliceController(self):  # noqa: N802 - Qt's name
        return self._controller

    def resize(self, width: int, height: int) -> None:
        """The user resizes the view (the widget tells its controller its new size)."""
        self._controller.setSliceViewSize(_Size(width, height))


@dataclass
class _Size:
    """QSize."""

    w: int
    h: int

    def width(self) -> int:
        return self.w

    def height(self) -> int:
        return self.h


class LayoutManager:
    """qSlicerLayoutManager: created by the main window only (Base/QTApp/qSlicerMainWindow.cxx,
    qSlicerMainWindowPrivate::setupUi: ``new qSlicerLayoutManager(layoutFrame)``, then
    ``qSlicerApplication::setLayoutManager``, which hands its slice logic collection to the application logic,
    Base/QTGUI/qSlicerApplication.cxx). qMRMLLayoutManager creates one slice node and logic per view."""

    def __init__(self, scene, app_logic):
        # qMRMLLayoutManager's vtkMRMLLayoutLogic (slicer-core's real class) adds the singleton layout node with
        # Slicer's standard layout descriptions
        self.layout_logic = slicer.vtkMRMLLayoutLogic()
        self.layout_logic.SetMRMLScene(scene)
        self.layout_node = self.layout_logic.GetLayoutNode()
        self.logics = vtkCollection()
        slicer.vtkMRMLSliceNode.AddDefaultSliceOrientationPresets(scene, True)
        self.widgets = {}
        for layout_name, orientation in VIEW_NODES.values():
            node = scene.AddNewNodeByClass("vtkMRMLSliceNode", layout_name)
            node.SetLayoutName(layout_name)
            node.SetSingletonTag(layout_name)
            node.SetDefaultOrientation(orientation)
            node.SetOrientation(orientation)
            node.SetDimensions(731, 412, 1)  # a widget's shape, not a square
            logic = slicer.vtkMRMLSliceLogic()
            logic.SetMRMLApplicationLogic(app_logic)
            logic.SetMRMLScene(scene)
            logic.SetSliceNode(node)
            self.logics.AddItem(logic)
            self.widgets[layout_name] = SliceWidget(logic)
        app_logic.SetSliceLogics(self.logics)

    def sliceWidget(self, name: str) -> SliceWidget:  # noqa: N802 - Qt's name
        return self.widgets[name]


@dataclass
class CliModule:
    """A CLI module (qSlicerCLIModule, Base/QTCLI/qSlicerCLIModule.h) whose executable is ``run(parameters) -> (ok,
    error text)``; on success it has already written its outputs into the scene nodes named by the parameters."""

    name: str
    title: str
    run: Callable[[dict], tuple[bool, str]]
    calls: list[dict] = field(default_factory=list)


class CliRunner:
    """``slicer.cli`` (Base/Python/slicer/cli.py): ``runSync`` returns the vtkMRMLCommandLineModuleNode and never
    raises when the module fails."""

    def __init__(self, scene, app_logic):
        self.scene, self.app_logic = scene, app_logic
        scene.RegisterNodeClass(slicer.vtkMRMLCommandLineModuleNode())

    def runSync(self, module: CliModule, node=None, parameters=None, delete_temporary_files=True,  # noqa: N802
                update_display=True):
        parameters = dict(parameters or {})
        module.calls.append({"parameters": parameters, "update_display": update_display})
        cli_node = node or self.scene.AddNewNodeByClass("vtkMRMLCommandLineModuleNode", module.name)
        ok, error_text = module.run(parameters)
        cli_node.SetErrorText(error_text)
        if not ok:
            # Base/QTCLI/vtkSlicerCLIModuleLogic.cxx: a non-zero exit sets CompletedWithErrors; outputs are only
            # reloaded while the status is Completing, so the scene keeps what the output nodes held before
            cli_node.SetStatus(cli_node.CompletedWithErrors)
            return cli_node
        cli_node.SetStatus(cli_node.Completed)
        output_id = parameters.get("outputVolume")
        if update_display and output_id:
            self._display(output_id)
        return cli_node

    def _display(self, volume_id: str) -> None:
        """vtkSlicerCLIModuleLogic.cxx: "displayData causes resetting of slice views (the output volume is shown in
        the background, the foreground volume is cleared, the middle slice is selected, the FOV is reset, etc.)",
        through vtkSlicerApplicationLogic::PropagateVolumeSelection."""
        logics = self.app_logic.GetSliceLogics()
        for index in range(logics.GetNumberOfItems() if logics is not None else 0):
            logic = logics.GetItemAsObject(index)
            composite = logic.GetSliceCompositeNode()
            composite.SetBackgroundVolumeID(volume_id)
            composite.SetForegroundVolumeID(None)
            logic.FitSliceToAll()


class Modules:
    """``slicer.modules`` (documented in Base/Python/slicer/__init__.py: every instantiated module by lower-case
    name, ``slicer.modules.volumes.logic()``): module objects with ``logic()``; CLI modules are added by the tests."""

    def __init__(self, color_logic, volumes_logic, segmentations_logic):
        for name, logic in (("colors", color_logic), ("volumes", volumes_logic),
                            ("segmentations", segmentations_logic)):
            setattr(self, name, _LoadableModule(logic))


@dataclass
class _CommandOptions:
    """qSlicerCoreCommandOptions (Base/QTCore/qSlicerCoreCommandOptions.cpp): the flags a script reads."""

    runPythonAndExit: bool = False  # noqa: N815 - Slicer's name
    testingEnabled: bool = False  # noqa: N815 - Slicer's name


@dataclass
class _LoadableModule:
    """qSlicerAbstractCoreModule (Base/QTCore/qSlicerAbstractCoreModule.h): ``logic()`` is the module's logic."""

    _logic: object

    def logic(self):
        return self._logic


# The loadable modules whose logics the application puts on its scene at start-up (qSlicerAbstractCoreModule::
# setMRMLScene -> logic->SetMRMLApplicationLogic, SetMRMLScene, Base/QTCore/qSlicerAbstractCoreModule.cxx), as far as
# slicer-core has their logic classes; each observes the scene from then on (the Markups logic, for one, gives every
# markups node added outside a batch a display node: Modules/Loadable/Markups/Logic/vtkSlicerMarkupsLogic.cxx
# OnMRMLSceneNodeAdded). Colors, Volumes and Segmentations come from build_core_logics.
MODULE_LOGICS = {"SubjectHierarchy": "vtkSlicerSubjectHierarchyModuleLogic", "Markups": "vtkSlicerMarkupsLogic",
                 "Transforms": "vtkSlicerTransformLogic", "Sequences": "vtkSlicerSequencesLogic",
                 "Units": "vtkSlicerUnitsLogic", "ViewControllers": "vtkSlicerViewControllersLogic",
                 "Tables": "vtkSlicerTablesLogic", "Texts": "vtkSlicerTextsLogic", "Models": "vtkSlicerModelsLogic",
                 "Cameras": "vtkSlicerCamerasModuleLogic", "Reformat": "vtkSlicerReformatLogic",
                 "CropVolume": "vtkSlicerCropVolumeLogic", "Plots": "vtkSlicerPlotsLogic",
                 "VolumeRendering": "vtkSlicerVolumeRenderingLogic", "Data": "vtkSlicerDataModuleLogic"}


class SubjectHierarchyPluginLogic:
    """qSlicerSubjectHierarchyPluginLogic (Modules/Loadable/SubjectHierarchy/Widgets/
    qSlicerSubjectHierarchyPluginLogic.cxx), the Qt half of the Subject Hierarchy module that slicer-core lacks:
    ``onNodeAdded`` puts every data node added outside a scene import and not hidden from editors under the scene
    item (the plugins own displayable nodes, transforms among them); ``onNodeAboutToBeRemoved`` removes its item
    (not when the scene is closing)."""

    def __init__(self, scene):
        self.scene = scene
        self.observers = [_observe_with_node(self.on_node_added), _observe_with_node(self.on_node_removed)]
        self.tags = [scene.AddObserver(slicer.vtkMRMLScene.NodeAddedEvent, self.observers[0]),
                     scene.AddObserver(slicer.vtkMRMLScene.NodeAboutToBeRemovedEvent, self.observers[1])]

    def hierarchy(self):
        return slicer.vtkMRMLSubjectHierarchyNode.GetSubjectHierarchyNode(self.scene)

    def on_node_added(self, scene, _event, node=None) -> None:
        if isinstance(node, slicer.vtkMRMLSubjectHierarchyNode):
            slicer.vtkMRMLSubjectHierarchyNode.ResolveSubjectHierarchy(scene)
        elif (node is not None and not scene.IsImporting() and not node.GetHideFromEditors()
              and node.IsA("vtkMRMLDisplayableNode")):
            hierarchy = self.hierarchy()
            if hierarchy is not None and not hierarchy.GetItemByDataNode(node):
                hierarchy.CreateItem(hierarchy.GetSceneItemID(), node)

    def on_node_removed(self, scene, _event, node=None) -> None:
        if node is None or scene.IsClosing() or isinstance(node, slicer.vtkMRMLSubjectHierarchyNode):
            return
        hierarchy = self.hierarchy()
        item = hierarchy.GetItemByDataNode(node) if hierarchy is not None else 0
        if item:
            hierarchy.RemoveItem(item, False, False)

    def close(self) -> None:
        for tag in self.tags:
            self.scene.RemoveObserver(tag)


def _observe_with_node(callback):
    """A VTK observer that receives the event's vtkObject call data (the added/removed node)."""
    @calldata_type(VTK_OBJECT)
    def observer(caller, event, node=None):
        callback(caller, event, node)

    return observer


class Application:
    """``slicer.app`` (qSlicerApplication): ``layoutManager()`` is None unless the main window was created."""

    # the release the application double stands for, the current stable (qSlicerCoreApplication's version properties)
    majorVersion, minorVersion, applicationVersion = 5, 12, "5.12.3"  # noqa: N815 - Slicer's names

    def __init__(self, main_window: bool):
        self.scene, self.app_logic, self.color_logic, self.volumes_logic, self.segmentations_logic = (
            build_core_logics())
        self.module_logics = {}
        for name, class_name in MODULE_LOGICS.items():
            logic = getattr(slicer, class_name)()
            logic.SetMRMLApplicationLogic(self.app_logic)
            logic.SetMRMLScene(self.scene)
            self.app_logic.SetModuleLogic(name, logic)
            self.module_logics[name] = logic
        self.subject_hierarchy = SubjectHierarchyPluginLogic(self.scene)
        # the application logic's slice logic collection is null until qSlicerApplication::setLayoutManager
        # (Base/QTGUI/qSlicerApplication.cxx) hands it the layout manager's
        self.app_logic.SetSliceLogics(None)
        self._layout_manager = LayoutManager(self.scene, self.app_logic) if main_window else None
        self.modules = Modules(self.color_logic, self.volumes_logic, self.segmentations_logic)
        self.cli = CliRunner(self.scene, self.app_logic)
        self._options = _CommandOptions()
        self.exit_status: int | None = None  # set by exit(); None: the event loop keeps running
        self.io_manager = None

    def layoutManager(self):  # noqa: N802 - Qt's name
        return self._layout_manager

    def commandOptions(self):  # noqa: N802 - Qt's name
        """qSlicerCoreCommandOptions; ``slicer.util.exit`` clears ``runPythonAndExit`` before ``exit``."""
        return self._options

    def exit(self, status: int = 0) -> None:
        """QCoreApplication::exit: the event loop ends with ``status`` once the running script returns."""
        self.exit_status = status

    def applicationLogic(self):  # noqa: N802 - Qt's name
        return self.app_logic

    def coreIOManager(self):  # noqa: N802 - Qt's name
        """qSlicerCoreApplication::coreIOManager; present once :func:`install_modules` gave it one."""
        return self.io_manager

    def setOverrideCursor(self, cursor) -> None:  # noqa: N802 - Qt's name
        """QGuiApplication::setOverrideCursor (the module's wait cursor while pip runs)."""
        from MedOpenClawLib.gui.qt_compat import application

        application().setOverrideCursor(cursor)

    def restoreOverrideCursor(self) -> None:  # noqa: N802 - Qt's name
        from MedOpenClawLib.gui.qt_compat import application

        application().restoreOverrideCursor()

    def processEvents(self) -> None:  # noqa: N802 - Qt's name
        """QCoreApplication::processEvents: the Qt event loop's pending events (timers, sockets) run here."""
        from MedOpenClawLib.gui.qt_compat import application

        application().processEvents()

    def run_event_loop(self, until: Callable[[], bool], timeout_s: float, wake_ms: int) -> bool:
        """qSlicerApplication's event loop as PythonQt runs it, until ``until()`` or ``timeout_s``: while Qt waits for
        its next event (here: the next timer, every ``wake_ms``) the main thread keeps the GIL, because PythonQt
        releases it only around slot calls and only with thread support on (commontk/PythonQt
        src/PythonQtMethodInfo.cpp ``PythonQtSlotInfo::invokeQtMethod``, ``_globalShouldAllowThreads`` false unless
        ``PythonQt::setEnableThreadSupport``, src/PythonQt.cpp, which neither Slicer nor CTK calls). Another Python
        thread runs only while the main thread runs Python (the timers' slots). PySide6's own event loop releases
        the GIL while it waits, so :meth:`processEvents` alone would be kinder than Slicer."""
        from MedOpenClawLib.gui.qt_compat import application

        wait_holding_the_gil = ctypes.PyDLL(None).usleep  # a PyDLL call never releases the GIL (libc usleep)
        deadline = time.monotonic() + timeout_s
        while not until():
            if time.monotonic() > deadline:
                return False
            wait_holding_the_gil(wake_ms * 1000)
            application().processEvents()  # the due timers' Python slots run here
        return True

    def close(self) -> None:
        """Detach in the order Slicer tears down: slice logics, module logics, then the application logic (after
        the modules' shared session stopped serving, as their cleanup at exit does)."""
        import sys

        sessions = sys.modules.get("MedOpenClawLib.gui.app_session")  # loaded by the modules, if they ran
        shared = sessions.shared_session() if sessions is not None else None
        if shared is not None:
            shared.stop_server()
        logics = self.app_logic.GetSliceLogics()
        for index in range(logics.GetNumberOfItems() if logics is not None else 0):
            logics.GetItemAsObject(index).SetMRMLScene(None)
        if self._layout_manager is not None:
            self._layout_manager.layout_logic.SetMRMLScene(None)
        self.subject_hierarchy.close()
        for logic in (*reversed(self.module_logics.values()), self.segmentations_logic, self.volumes_logic,
                      self.color_logic):
            logic.SetMRMLScene(None)
        self.app_logic.SetMRMLScene(None)


def install(monkeypatch, main_window: bool) -> Application:
    """Make ``import slicer`` look like the inside of the Slicer application for the rest of the test."""
    app = Application(main_window)
    monkeypatch.setattr(slicer, "app", app, raising=False)
    monkeypatch.setattr(slicer, "mrmlScene", app.scene, raising=False)
    monkeypatch.setattr(slicer, "modules", app.modules, raising=False)
    monkeypatch.setattr(slicer, "cli", app.cli, raising=False)
    return app


def brains_modules(app: Application, fail_fit: str | None = None, fail_resample: str | None = None,
                   matrix: np.ndarray | None = None) -> tuple[CliModule, CliModule]:
    """BRAINSFit and BRAINSResample doubles (parameter names from BRAINSTools' XML). On success BRAINSFit writes
    ``matrix`` into ``linearTransform`` and BRAINSResample copies the moving voxels into ``outputVolume``;
    with ``fail_*`` the module exits non-zero with that text on standard error and writes nothing. BRAINSFit also
    fails on a constant moving image, as the real one does (no mutual information to optimise)."""
    matrix = np.eye(4) if matrix is None else matrix

    def brainsfit(parameters: dict) -> tuple[bool, str]:
        if fail_fit is not None:
            return False, fail_fit
        moving = slicer.util.arrayFromVolume(app.scene.GetNodeByID(parameters["movingVolume"]))
        if moving.min() == moving.max():
            return False, "ERROR: Too many samples map outside moving image buffer (constant image)"
        transform = app.scene.GetNodeByID(parameters["linearTransform"])
        transform.SetMatrixTransformToParent(numpy_to_vtk_matrix(matrix))
        return True, ""

    def brainsresample(parameters: dict) -> tuple[bool, str]:
        if fail_resample is not None:
            return False, fail_resample
        moving = slicer.util.arrayFromVolume(app.scene.GetNodeByID(parameters["inputVolume"]))
        output = app.scene.GetNodeByID(parameters["outputVolume"])
        target = slicer.util.arrayFromVolume(output)
        target[...] = moving.astype(target.dtype) if moving.shape == target.shape else 1
        slicer.util.arrayFromVolumeModified(output)
        return True, ""

    fit = CliModule("brainsfit", "General Registration (BRAINS)", brainsfit)
    resample = CliModule("brainsresample", "Resample Image (BRAINS)", brainsresample)
    app.modules.brainsfit, app.modules.brainsresample = fit, resample
    return fit, resample


class CoreIOManager:
    """``slicer.app.coreIOManager()`` (Base/QTCore/qSlicerCoreIOManager.cxx) with the one writer our code meets,
    qSlicerNodeWriter for volumes (Base/QTGUI/qSlicerNodeWriter.cxx ``write``): the node's storage node, added by
    ``createAndAddDefaultStorageNode`` (``AddDefaultStorageNode``) when it has none, writes ``fileName``; a node
    no writer takes, or a missing file name, fails with a message, as ``saveNodes`` does."""

    WRITERS = {"VolumeFile": "vtkMRMLVolumeNode"}

    def __init__(self, scene):
        self.scene = scene

    def fileWriterFileType(self, node) -> str:  # noqa: N802 - Qt's name
        return next((kind for kind, class_name in self.WRITERS.items() if node.IsA(class_name)), "NoFile")

    def saveNodes(self, file_type: str, properties: dict, user_messages=None) -> bool:  # noqa: N802 - Qt's name
        import os

        file_name = str(properties.get("fileName") or "")
        node = self.scene.GetNodeByID(properties.get("nodeID", ""))
        if not file_name or file_type not in self.WRITERS or node is None or not node.IsA(self.WRITERS[file_type]):
            if user_messages is not None:
                user_messages.AddMessage(vtkCommand.ErrorEvent,
                                         f"No writer found to write file {file_name} of type {file_type}.")
            return False
        os.makedirs(os.path.dirname(os.path.abspath(file_name)), exist_ok=True)
        if node.GetStorageNode() is None and not node.AddDefaultStorageNode():
            return False
        storage = node.GetStorageNode()
        storage.SetFileName(file_name)
        storage.SetURI(None)
        written = bool(storage.WriteData(node))
        if user_messages is not None:
            user_messages.AddMessages(storage.GetUserMessages())
        return written


# the packages a scripted module imports on its own; a fresh application has loaded none of them yet
MODULE_PACKAGES = ("MedOpenClawLib", "MedCopilotLib", "MedOpenClaw", "MedCopilot")
# what stands in for the application itself (PythonQt's ``qt``) and stays loaded
APPLICATION_PARTS = ("MedOpenClawLib.gui.qt_compat",)


def install_modules(monkeypatch, app: Application, home) -> None:
    """What the scripted modules and their tests need of the running application beyond the scene: ``qt``
    (PySide6 standing in for PythonQt), ``slicer.ScriptedLoadableModule``, ``slicer.testing``, the event loop, the
    core IO manager, the default scene path, ``--testing``, and QSettings in an ini file of ``home``
    (qSlicerCoreApplication sets ``QSettings::setDefaultFormat(QSettings::IniFormat)``;
    Base/QTCore/qSlicerCoreApplication.cxx).

    The modules and their packages are forgotten (restored after the test) and nothing of them is imported here:
    in a freshly started Slicer no MedOpenClaw code has run, so a module that imports a package before installing
    what it needs fails here as it fails there (with the packages hidden, as a fresh Slicer lacks them)."""
    import sys
    from pathlib import Path

    from slicer_scripted_module_double import scripted_module_double, testing_double

    from MedOpenClawLib.gui.qt_compat import application, qt

    application()
    settings_file = str(Path(home) / "Slicer.ini")

    class Settings(qt.QSettings):
        def __init__(self):
            super().__init__(settings_file, qt.QSettings.IniFormat)

    monkeypatch.setattr(qt, "QSettings", Settings)
    monkeypatch.setitem(sys.modules, "qt", qt)
    for part in (scripted_module_double(), testing_double()):
        monkeypatch.setitem(sys.modules, part.__name__, part)
        monkeypatch.setattr(slicer, part.__name__.split(".")[1], part, raising=False)
    monkeypatch.setattr(app, "defaultScenePath", str(Path(home) / "Documents"), raising=False)
    app._options.testingEnabled = True
    app.io_manager = CoreIOManager(app.scene)
    for name in [name for name in sys.modules
                 if name.split(".")[0] in MODULE_PACKAGES and name not in APPLICATION_PARTS]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "MedCopilot"))
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "MedOpenClaw"))

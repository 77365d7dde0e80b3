"""The code paths only the real 3D Slicer application runs, against the application
double of ``slicer_app_double`` (each behaviour there cites the Slicer source it mirrors)."""

from __future__ import annotations

import numpy as np
import pytest
import slicer
import slicer_app_double
from runtime_data import call_ok, oblique_lps_affine, phantom, write_nifti

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.core.audit import AuditTrace
from MedOpenClawLib.viewer.application import VIEW_NODES, SlicerApplication

SHIFT = np.array([[1, 0, 0, 4.0], [0, 1, 0, -3.0], [0, 0, 1, 2.0], [0, 0, 0, 1]])


@pytest.fixture()
def data_root(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    write_nifti(root / "T1c.nii.gz", phantom(1), oblique_lps_affine())
    write_nifti(root / "FLAIR.nii.gz", phantom(2), oblique_lps_affine())
    return root


@pytest.fixture()
def no_main_window(monkeypatch):
    app = slicer_app_double.install(monkeypatch, main_window=False)
    yield app
    app.close()


@pytest.fixture()
def gui(monkeypatch):
    app = slicer_app_double.install(monkeypatch, main_window=True)
    yield app
    app.close()


# ------------------------------------------------------------------- the application's scene observers
def hierarchy_items(app) -> set[str]:
    """IDs of the data nodes the Data module lists (subject hierarchy items under the scene)."""
    from vtkmodules.vtkCommonCore import vtkIdList

    hierarchy, children = app.subject_hierarchy.hierarchy(), vtkIdList()
    hierarchy.GetItemChildren(hierarchy.GetSceneItemID(), children, True)
    return {hierarchy.GetItemDataNode(children.GetId(i)).GetID() for i in range(children.GetNumberOfIds())}


def test_the_apps_module_logics_observe_what_the_agent_adds(gui, data_root, monkeypatch):
    """The Markups logic gives evidence markups their display node, the subject hierarchy lists every volume and
    markup the agent adds and forgets those a new case or a rolled-back action removed."""
    from MedOpenClawLib.core import policy

    registry = build_slicer_registry([data_root], app=SlicerApplication.create())
    call_ok(registry, "open_case", dicom_dir=str(data_root), size=64)
    volumes = {node.GetID() for node in registry.context.engine.volume_nodes()}
    assert volumes and volumes <= hierarchy_items(gui)
    centre = call_ok(registry, "image_coords_to_ras", view="axial", point_1000=[500, 500]).data["ras"]
    point = call_ok(registry, "record_point", ras=centre, label="lesion").data
    markups = slicer.mrmlScene.GetNodeByID(registry.context.evidence.items[-1].node_id)
    assert markups.GetNumberOfDisplayNodes() == 1, "one display node: the Markups logic's, none of our own"
    assert markups.GetID() in hierarchy_items(gui) and point["evidence_id"]
    nodes = slicer.mrmlScene.GetNumberOfNodes()
    monkeypatch.setattr(policy, "MAX_EVIDENCE_ITEMS", len(registry.context.evidence.items))
    refused = registry.call("record_point", {"ras": point["ras"], "label": "again"})
    assert refused.error["code"] == "evidence_full"
    assert slicer.mrmlScene.GetNumberOfNodes() == nodes, "the rolled-back markup left its display node behind"
    assert len(hierarchy_items(gui)) == len(volumes) + 1
    call_ok(registry, "open_case", dicom_dir=str(data_root), size=64)
    assert not (volumes | {markups.GetID()}) & hierarchy_items(gui), "the Data module lists removed nodes"


# ------------------------------------------------------------------------------ item 1: --no-main-window
def test_without_main_window_slice_logics_are_built_on_the_app_scene(no_main_window, data_root):
    assert slicer.app.layoutManager() is None and slicer.app.applicationLogic().GetSliceLogics() is None
    app = SlicerApplication.create()
    assert app.embedded and not app.gui_views and app.scene is slicer.mrmlScene
    collection = slicer.app.applicationLogic().GetSliceLogics()
    assert collection.GetNumberOfItems() == 3
    for view, logic in app.slice_logics.items():
        assert logic.GetSliceNode().GetLayoutName() == VIEW_NODES[view][0]
        assert slicer.mrmlScene.GetNodeByID(logic.GetSliceNode().GetID()) is not None
    registry = build_slicer_registry([data_root], app=app)
    observed = call_ok(registry, "open_case", dicom_dir=str(data_root), size=64)
    assert len(observed.images) == 3 and registry.context.engine.active_volume().GetScene() is slicer.mrmlScene
    call_ok(registry, "image_coords_to_ras", view="axial", point_1000=[500, 500])
    app.close()  # detaches its own slice logics; the application's scene stays
    assert collection.GetNumberOfItems() == 0 and slicer.mrmlScene.GetNumberOfNodesByClass("vtkMRMLScalarVolumeNode")


def test_bench_worker_runs_episodes_in_slicer_without_main_window(no_main_window, data_root, monkeypatch):
    """The path of `bench run --slicer`: worker/scripts/run_bench.py -> worker.service.build_radiology."""
    from MedOpenClawLib.worker import service as worker

    monkeypatch.setattr(worker, "_SLICER_APP", [])
    for _episode in range(2):  # the worker reuses its application, clearing the scene between episodes
        registry = worker.build_radiology([str(data_root)], "A", AuditTrace(None), None)
        call_ok(registry, "open_case", dicom_dir=str(data_root), size=64)
        call_ok(registry, "scroll", view="axial", direction="up", num_slices=2, size=64)
        data = call_ok(registry, "image_coords_to_ras", view="axial", point_1000=[400, 600]).data
        assert data["inside_volume"]
    assert worker._SLICER_APP[0].embedded and not worker._SLICER_APP[0].gui_views
    worker._SLICER_APP[0].close()


# --------------------------------------------------------------------- item 4: views resized by the GUI
def test_gui_view_resize_does_not_move_the_agents_points(gui, data_root):
    app = SlicerApplication.create()
    assert app.gui_views and app.slice_logics["axial"] is gui.layoutManager().sliceWidget("Red").sliceLogic()
    registry = build_slicer_registry([data_root], app=app)
    image = call_ok(registry, "open_case", dicom_dir=str(data_root), size=128).images[0]
    node = app.slice_logics["axial"].GetSliceNode()
    assert tuple(node.GetDimensions())[:2] == (731, 412), "rendering must not reshape the clinician's view"
    before = call_ok(registry, "image_coords_to_ras", view="axial", point_1000=[150, 820]).data
    gui.layoutManager().sliceWidget("Red").resize(1280, 520)
    after = call_ok(registry, "image_coords_to_ras", view="axial", point_1000=[150, 820]).data
    assert after["ras"] == pytest.approx(before["ras"], abs=1e-3) and after["image_id"] == image.image_id
    assert after["warnings"][0]["code"] == "view_changed"
    again = call_ok(registry, "observe", view="axial", size=128).images[0]
    assert again.image_id != image.image_id and tuple(node.GetDimensions())[:2] == (1280, 520)
    assert "warnings" not in call_ok(registry, "image_coords_to_ras", view="axial", point_1000=[150, 820]).data


def test_layout_changes_go_through_the_gui_layout_node_only_with_views(gui, data_root):
    layout = gui.layoutManager().layout_node
    registry = build_slicer_registry([data_root], app=SlicerApplication.create())
    call_ok(registry, "open_case", dicom_dir=str(data_root), size=64)
    call_ok(registry, "set_layout", layout="one_up_axial", size=64)
    assert layout.GetViewArrangement() == slicer.vtkMRMLLayoutNode.SlicerLayoutOneUpRedSliceView


# ------------------------------------------------------------- items 2-3: BRAINSFit / BRAINSResample CLIs
def track_b(data_root):
    registry = build_slicer_registry([data_root], track="B", app=SlicerApplication.create())
    call_ok(registry, "open_case", dicom_dir=str(data_root), size=64)
    call_ok(registry, "fusion", background_volume_ref="T1c", foreground_volume_ref="FLAIR", foreground_opacity=0.4,
            size=64)
    call_ok(registry, "zoom", view="axial", factor=1.7, size=64)
    return registry


def test_failed_brainsfit_is_an_error_and_leaves_no_identity_transform(gui, data_root):
    fit, _ = slicer_app_double.brains_modules(gui, fail_fit="itk::ExceptionObject: Too many samples map outside")
    registry = track_b(data_root)
    before = registry.context.state()
    transforms = slicer.mrmlScene.GetNumberOfNodesByClass("vtkMRMLLinearTransformNode")
    result = registry.call("register_volumes", {"fixed_volume_ref": "T1c", "moving_volume_ref": "FLAIR"})
    assert not result.ok and result.error["code"] == "registration_failed"
    assert "completed with errors" in result.error["message"] and "Too many samples" in result.error["message"]
    assert registry.context.state() == before
    assert slicer.mrmlScene.GetNumberOfNodesByClass("vtkMRMLLinearTransformNode") == transforms
    assert slicer.mrmlScene.GetNumberOfNodesByClass("vtkMRMLCommandLineModuleNode") == 0
    assert fit.calls[0]["parameters"]["transformType"] == "Rigid"


def test_brainsfit_result_is_read_from_the_transform_and_views_are_kept(gui, data_root):
    fit, _ = slicer_app_double.brains_modules(gui, matrix=SHIFT)
    registry = track_b(data_root)
    views = registry.context.state()["views"]
    data = call_ok(registry, "register_volumes", fixed_volume_ref="T1c", moving_volume_ref="FLAIR").data
    assert data["parameters"]["backend"] == "BRAINSFit"
    assert np.allclose(data["matrix_ras"], SHIFT)
    assert fit.calls[0]["update_display"] is False
    assert registry.context.state()["views"] == views
    assert slicer.mrmlScene.GetNumberOfNodesByClass("vtkMRMLCommandLineModuleNode") == 0


def test_failed_brainsresample_leaves_no_all_zero_volume(gui, data_root):
    slicer_app_double.brains_modules(gui, matrix=SHIFT, fail_resample="Error: could not write outputVolume")
    registry = track_b(data_root)
    transform = call_ok(registry, "register_volumes", fixed_volume_ref="T1c", moving_volume_ref="FLAIR").data
    volumes = len(registry.context.engine.volume_nodes())
    result = registry.call("resample_volume", {"volume_name": "FLAIR", "transform_name": transform["transform_id"],
                                               "reference_volume_ref": "T1c"})
    assert not result.ok and result.error["code"] == "registration_failed"
    assert "could not write outputVolume" in result.error["message"]
    assert len(registry.context.engine.volume_nodes()) == volumes


def test_brainsresample_keeps_the_users_views_and_records_its_output(gui, data_root):
    _, resample = slicer_app_double.brains_modules(gui, matrix=SHIFT)
    registry = track_b(data_root)
    transform = call_ok(registry, "register_volumes", fixed_volume_ref="T1c", moving_volume_ref="FLAIR").data
    views = registry.context.state()["views"]
    data = call_ok(registry, "resample_volume", volume_name="FLAIR", transform_name=transform["transform_id"],
                   reference_volume_ref="T1c").data
    assert resample.calls[0]["update_display"] is False
    assert registry.context.state()["views"] == views, "the output must not replace the user's background/fusion"
    output = slicer.mrmlScene.GetNodeByID(data["outputs"]["volume_id"])
    assert data["parameters"]["backend"] == "BRAINSResample" and slicer.util.arrayFromVolume(output).any()


def test_replay_runs_the_registration_engine_the_trace_recorded(gui, data_root, tmp_path):
    """A trace registered with BRAINSFit is replayed with BRAINSFit (the application's CLI modules) or refused with
    the reason -- never with SimpleITK, whose other transform would be reported as the trace's mismatch. The audit
    panel's Replay button replays on a headless scene, so it refuses."""
    from MedOpenClawLib.gui import trace_tools
    from MedOpenClawLib.replay import replay_records

    slicer_app_double.brains_modules(gui, matrix=SHIFT)
    path = tmp_path / "trace.jsonl"
    registry = build_slicer_registry([data_root], track="B", trace=AuditTrace(path), app=SlicerApplication.create())
    call_ok(registry, "open_case", dicom_dir=str(data_root), size=64)
    fit = call_ok(registry, "register_volumes", fixed_volume_ref="T1c", moving_volume_ref="FLAIR")
    assert fit.data["parameters"]["backend"] == "BRAINSFit"
    seq = registry.trace.records[-1]["seq"]
    report = trace_tools.replay(path, [data_root])
    assert not report.ok and report.first_mismatch_seq == seq
    assert "ran BRAINSFit" in report.message and "inside 3D Slicer" in report.message and "SimpleITK" in report.message
    slicer.mrmlScene.Clear(0)
    again = build_slicer_registry([data_root], track="B", app=SlicerApplication.create())
    replayed = replay_records(again, registry.trace.records)
    assert replayed.ok, replayed.message
    assert again.context.state()["volumes"] and len(gui.modules.brainsfit.calls) == 2


def test_the_double_resets_views_when_update_display_is_left_on(gui, data_root):
    """The behaviour the two tests above guard against is really in the double (so they can fail)."""
    _, resample = slicer_app_double.brains_modules(gui)
    registry = track_b(data_root)
    views = registry.context.state()["views"]
    t1c = registry.context.engine.find_volume(volume_name="T1c")
    output = slicer.mrmlScene.AddNewNodeByClass("vtkMRMLScalarVolumeNode", "out")
    output.SetAndObserveImageData(t1c.GetImageData())
    slicer.cli.runSync(resample, None, {"inputVolume": t1c.GetID(), "outputVolume": output.GetID()})
    changed = registry.context.state()["views"]
    assert changed["axial"]["foreground"] is None and changed["axial"]["background"] == "out"
    assert changed["axial"]["field_of_view_mm"] != views["axial"]["field_of_view_mm"]


# ------------------------------------------------------------------- item 7: QSocketNotifier in PythonQt
class PythonQtSocketNotifier:
    """PythonQt's QSocketNotifier: ``activated`` is overloaded (``activated(int)`` and, since Qt 5.15,
    ``activated(QSocketDescriptor, QSocketNotifier::Type)``); Slicer's WebServer module connects it by its explicit
    signature (Modules/Scripted/WebServer/WebServer.py, class SlicerHTTPServer), the only form that reaches the slot."""

    def __init__(self):
        self.slots = []

    def connect(self, signature, slot):
        assert signature == "activated(int)"
        self.slots.append(slot)

    @property
    def activated(self):
        raise AssertionError("an attribute-style connect picks an overload PythonQt cannot convert")

    def emit(self, fileno: int) -> None:
        for slot in self.slots:
            slot(fileno)


def test_socket_notifiers_connect_by_explicit_signature_inside_slicer(monkeypatch):
    import ast
    import inspect

    from MedOpenClawLib.gui import loopback_server, qt_compat

    monkeypatch.setattr(qt_compat.qt, "BINDING", "PythonQt")
    notifier, received = PythonQtSocketNotifier(), []
    qt_compat.connect_activated(notifier, received.append)
    notifier.emit(7)
    assert received == [7]
    tree = ast.parse(inspect.getsource(loopback_server))
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "activated"]

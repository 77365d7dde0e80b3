"""Track B operator actions through the registry on a real slicer-core scene: happy paths, bad inputs (which
must leave the scene unchanged), audit records, and the artifact graph's F3 warnings."""

from __future__ import annotations

import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
import pydicom
import pytest
import torch
from operator_phantoms import lesion_volume, phantom_volume, rotation_matrix
from runtime_data import call_error, call_ok, write_dicom_series

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.core.audit import AuditTrace, state_at, verify_trace
from MedOpenClawLib.operators import scene_nodes, vista3d

TRUTH = np.eye(4)
TRUTH[:3, :3] = rotation_matrix((6.0, 0.0, -5.0))
TRUTH[:3, 3] = (4.0, -3.0, 2.0)


def write_volume(path, volume):
    nib.save(nib.Nifti1Image(volume.array.transpose(2, 1, 0).astype(np.float32), volume.ijk_to_ras), str(path))


@pytest.fixture(scope="module")
def case_files(tmp_path_factory):
    """The case's volumes and CT series, written once for the module; each session opens its own copy (a test
    may delete a file of it)."""
    root = tmp_path_factory.mktemp("case")
    write_volume(root / "baseline.nii.gz", phantom_volume((40, 40, 40)))
    write_volume(root / "followup.nii.gz", phantom_volume((42, 40, 38), moving_to_fixed=TRUTH))
    lesion, truth, centre = lesion_volume((32, 32, 24))
    write_volume(root / "lesion.nii.gz", lesion)
    ct = np.full((40, 36, 16), -1000, np.int16)
    ct[6:34, 6:30, 3:13] = 40
    ct[16:24, 14:22, 6:10] = 180
    write_dicom_series(root / "ct", ct, np.diag([-1.2, -1.2, 3.0, 1.0]), modality="CT", description="CT")
    return root, {"truth_mask": truth, "lesion_centre": centre}


@pytest.fixture()
def session(tmp_path, case_files):
    files, facts = case_files
    root = tmp_path / "case"
    shutil.copytree(files, root)
    registry = build_slicer_registry([root], track="B", trace=AuditTrace(tmp_path / "trace.jsonl"),
                                     artifacts_dir=tmp_path / "artifacts")
    call_ok(registry, "open_case", dicom_dir=str(root), size=64)
    return registry, {**facts, "root": root, "trace": tmp_path / "trace.jsonl"}



def test_operators_are_offered_on_track_b_only(tmp_path):
    track_a = build_slicer_registry([tmp_path], track="A")
    assert track_a.get("register_volumes") is None
    track_b = build_slicer_registry([tmp_path], track="B")
    names = {action.name for action in track_b.actions()}
    assert {"vista3d_segment", "register_volumes", "apply_transform", "resample_volume", "segment_region",
            "quantify", "export_dicom_seg", "import_dicom_seg"} <= names
    assert all(action.role == "operator" and action.tracks == ("B",) for action in track_b.actions()
               if action.name in names - {a.name for a in track_a.actions()})


def test_registration_workflow_and_fusion_warnings(session):
    registry, info = session
    fusion = call_ok(registry, "fusion", background_volume_ref="baseline", foreground_volume_ref="followup", size=64)
    assert [w["code"] for w in fusion.data["warnings"]] == ["alignment_unverified"]

    result = call_ok(registry, "register_volumes", fixed_volume_ref="baseline", moving_volume_ref="followup")
    matrix = np.array(result.data["matrix_ras"])
    corners = np.array([[x, y, z, 1.0] for x in (-15, 15) for y in (-15, 15) for z in (-12, 12)])
    assert np.abs((corners @ matrix.T - corners @ TRUTH.T)[:, :3]).max() < 1.0
    transform_id = result.data["transform_id"]
    assert result.data["outputs"]["transform_id"] == transform_id and result.data["parameters"]["seed"]
    record = registry.trace.actions()[-1]
    assert record["action"] == "register_volumes" and record["result"]["data"]["matrix_ras"] == result.data[
        "matrix_ras"]
    graph = state_at(registry.trace.records, record["seq"])["artifacts"]
    assert graph["transforms"][0]["moving"] == result.data["inputs"]["moving_volume_id"]

    resampled = call_ok(registry, "resample_volume", volume_name="followup", transform_name=transform_id,
                        reference_volume_ref="baseline")
    fused = call_ok(registry, "fusion", background_volume_ref="baseline",
                    foreground_volume_ref=resampled.data["outputs"]["volume_name"], size=64)
    assert "warnings" not in fused.data
    call_ok(registry, "apply_transform", volume_name="followup", transform_name=transform_id, size=64)
    fused = call_ok(registry, "fusion", background_volume_ref="baseline", foreground_volume_ref="followup", size=64)
    assert "warnings" not in fused.data
    assert verify_trace(info["trace"]).ok


def test_former_argument_names_run_under_their_current_names(session):
    """A trace (or client) from before the volume convention: fixed_volume/moving_volume/reference_volume are read
    as the *_volume_ref they became, the trace records the current names, and both names at once are refused."""
    registry, _ = session
    old = call_ok(registry, "register_volumes", fixed_volume="baseline", moving_volume="followup")
    recorded = registry.trace.actions()[-1]["arguments"]
    assert recorded == {"fixed_volume_ref": "baseline", "moving_volume_ref": "followup"}
    transform = old.data["transform_id"]
    call_ok(registry, "resample_volume", volume_id=old.data["inputs"]["moving_volume_id"], transform_name=transform,
            reference_volume="baseline")
    both = call_error(registry, "register_volumes", "invalid_argument", fixed_volume="baseline",
                      fixed_volume_ref="baseline", moving_volume_ref="followup")
    assert "give fixed_volume_ref only" in both.error["message"]
    missing = call_error(registry, "apply_transform", "invalid_argument", transform_name=transform)
    assert missing.error["message"] == "apply_transform: arguments: Give volume_id or volume_name."


def test_registration_and_binding_refuse_bad_inputs(session):
    registry, _ = session
    call_error(registry, "register_volumes", "invalid_argument", fixed_volume_ref="baseline",
               moving_volume_ref="baseline")
    call_error(registry, "register_volumes", "volume_not_found", fixed_volume_ref="baseline",
               moving_volume_ref="nope")
    call_error(registry, "register_volumes", "invalid_argument", fixed_volume_ref="baseline",
               moving_volume_ref="followup", transform_type="bspline")
    call_error(registry, "apply_transform", "transform_not_found", volume_name="followup", transform_name="T")
    scene = registry.context.engine
    for name, frame in (("baseline", "timepoint-1"), ("lesion", "timepoint-1"), ("followup", "timepoint-2")):
        scene.find_volume(volume_name=name).SetAttribute(scene_nodes.FRAME, frame)
    transform = call_ok(registry, "register_volumes", fixed_volume_ref="baseline", moving_volume_ref="followup").data
    # binding the follow-up's transform to a baseline-session volume is the paper's F3 misbinding
    call_error(registry, "apply_transform", "wrong_space", volume_name="lesion",
               transform_name=transform["transform_id"])
    call_error(registry, "resample_volume", "wrong_space", volume_name="lesion",
               transform_name=transform["transform_id"], reference_volume_ref="baseline")
    fusion = call_ok(registry, "fusion", background_volume_ref="baseline", foreground_volume_ref="followup", size=64)
    assert [w["code"] for w in fusion.data["warnings"]] == ["unregistered"]


def test_segment_region_and_quantify(session):
    registry, info = session
    result = call_ok(registry, "segment_region", volume_name="lesion", seeds_ras=[info["lesion_centre"].tolist()],
                     segment_name="lesion", size=64)
    segmentation = result.data["outputs"]["segmentation_name"]
    stats = result.data["segments"][0]
    assert stats["volume_ml"] == pytest.approx(info["truth_mask"].sum() * 2.0 / 1000.0, rel=0.1)
    assert np.allclose(stats["centroid_ras"], info["lesion_centre"], atol=1.0)
    assert result.images and registry.context.engine.view_state("axial")["label"].startswith(segmentation)
    engine = registry.context.engine
    node = scene_nodes.find_segmentation(engine.scene, segmentation)
    mask = scene_nodes.segment_mask(engine.app, node, scene_nodes.segment_ids(node)[0], engine.find_volume(
        volume_name="lesion"))
    assert 2.0 * (mask & info["truth_mask"]).sum() / (mask.sum() + info["truth_mask"].sum()) > 0.9

    measured = call_ok(registry, "quantify", segmentation_name=segmentation)
    assert measured.data["statistics"]["rano"]["bidimensional_product_mm2"] > 0
    assert measured.data["statistics"]["volume_ml"] == stats["volume_ml"]
    call_error(registry, "quantify", "segmentation_not_found", segmentation_name="nothing")
    call_error(registry, "quantify", "segment_not_found", segmentation_name=segmentation, segment_name="liver")
    engine.find_volume(volume_name="lesion").SetAttribute(scene_nodes.FRAME, "A")
    engine.find_volume(volume_name="followup").SetAttribute(scene_nodes.FRAME, "B")
    call_error(registry, "quantify", "wrong_space", segmentation_name=segmentation, volume_name="followup")


def test_segment_region_refuses_points_outside_the_volume(session):
    registry, _ = session
    call_error(registry, "segment_region", "outside_volume", volume_name="lesion", seeds_ras=[[500.0, 0.0, 0.0]])
    call_error(registry, "segment_region", "invalid_argument", volume_name="lesion", seeds_1000=[[500, 500]])
    call_error(registry, "segment_region", "invalid_argument", volume_name="lesion", seeds_ras=[[0.0, 0.0, 0.0]],
               method="threshold")


def test_screen_seeds_read_on_another_volume_are_checked_for_alignment(session):
    registry, _ = session
    call_ok(registry, "select_volume", volume_name="lesion", size=64)
    here = call_ok(registry, "segment_region", volume_name="lesion", seeds_1000=[[500, 500]], view="axial", size=64)
    assert "warnings" not in here.data
    # clicked on the lesion volume's view, grown in the baseline volume: nothing shows they share a space
    there = call_ok(registry, "segment_region", volume_name="baseline", seeds_1000=[[500, 500]], view="axial",
                    size=64)
    assert [w["code"] for w in there.data["warnings"]] == ["alignment_unverified"]
    engine = registry.context.engine
    engine.find_volume(volume_name="lesion").SetAttribute(scene_nodes.FRAME, "A")
    engine.find_volume(volume_name="baseline").SetAttribute(scene_nodes.FRAME, "B")
    call_error(registry, "segment_region", "wrong_space", volume_name="baseline", seeds_1000=[[500, 500]],
               view="axial")


def test_quantify_box_roi_from_evidence(session):
    registry, _ = session
    call_ok(registry, "select_volume", volume_name="lesion", size=64)
    roi = call_ok(registry, "draw_roi", view="axial", shape="box", bbox_1000=[300, 300, 700, 700], size=64)
    measured = call_ok(registry, "quantify", roi_evidence_id=roi.data["evidence_id"])
    assert measured.data["statistics"]["voxel_count"] > 0 and measured.data["inputs"]["roi_evidence_id"]
    call_error(registry, "quantify", "evidence_not_found", roi_evidence_id="ev99")
    # the ROI was drawn on the lesion volume: measuring it on another volume is the F3 question again
    elsewhere = call_ok(registry, "quantify", roi_evidence_id=roi.data["evidence_id"], volume_name="baseline")
    assert [w["code"] for w in elsewhere.data["warnings"]] == ["alignment_unverified"]
    engine = registry.context.engine
    engine.find_volume(volume_name="lesion").SetAttribute(scene_nodes.FRAME, "A")
    engine.find_volume(volume_name="baseline").SetAttribute(scene_nodes.FRAME, "B")
    call_error(registry, "quantify", "wrong_space", roi_evidence_id=roi.data["evidence_id"], volume_name="baseline")


@pytest.fixture()
def bundle(tmp_path, monkeypatch):
    torch.manual_seed(0)
    network = vista3d.build_network(feature_size=8, blocks_down=(1, 1, 1, 1, 1))
    (tmp_path / "vista3d" / "models").mkdir(parents=True)
    (tmp_path / "vista3d" / "configs").mkdir()
    torch.save(network.state_dict(), tmp_path / "vista3d" / "models" / "model.pt")
    (tmp_path / "vista3d" / "configs" / "inference.json").write_text('{"patch_size": [64, 64, 64]}')
    monkeypatch.setenv(vista3d.BUNDLE_SETTING, str(tmp_path / "vista3d"))


def test_vista3d_segment_and_dicom_seg_round_trip(session, bundle):
    registry, info = session
    ct = registry.context.engine.find_volume(volume_name="CT")
    result = call_ok(registry, "vista3d_segment", volume_name="CT", label_prompt=["spleen", 1], size=64)
    assert result.data["parameters"]["expanded_labels"] == [3, 1] and result.data["parameters"]["device"] == "cpu"
    for segment in result.data["segments"]:
        assert segment["segment"] in ("spleen", "liver") and segment["volume_ml"] > 0
    point = ct_centre(ct)
    refined = call_ok(registry, "vista3d_segment", volume_name="CT", label_prompt=["lung tumor"],
                      point_prompts_ras=[point], size=64)
    assert refined.data["parameters"]["point_prompts_ras"] == [pytest.approx(point, abs=1e-3)]

    segmentation = result.data["outputs"]["segmentation_name"]
    engine = registry.context.engine
    node = scene_nodes.find_segmentation(engine.scene, segmentation)
    assert scene_nodes.segment_ids(node), "the seeded random network segments something in this volume"
    exported = call_ok(registry, "export_dicom_seg", segmentation_name=segmentation)
    path = exported.data["outputs"]["path"]
    assert exported.artifacts[0]["sha256"] == exported.data["outputs"]["sha256"]
    assert pydicom.dcmread(path).ReferencedSeriesSequence[0].SeriesInstanceUID == pydicom.dcmread(
        ct.GetAttribute("DICOM.instanceFiles").split("|")[0]).SeriesInstanceUID
    imported = call_ok(registry, "import_dicom_seg", path=path, volume_name="CT", size=64)
    back = scene_nodes.find_segmentation(engine.scene, imported.data["outputs"]["segmentation_name"])
    for original_id, imported_id in zip(scene_nodes.segment_ids(node), scene_nodes.segment_ids(back), strict=True):
        assert np.array_equal(scene_nodes.segment_mask(engine.app, node, original_id, ct),
                              scene_nodes.segment_mask(engine.app, back, imported_id, ct))
    again = call_ok(registry, "export_dicom_seg", segmentation_name=segmentation)
    assert again.data["outputs"]["path"] != path  # an export never overwrites an earlier, audited one
    assert verify_trace(info["trace"]).ok

    first_source_file = Path(ct.GetAttribute("DICOM.instanceFiles").split("|")[0])
    first_source_file.unlink()  # the source series went away after loading
    call_error(registry, "export_dicom_seg", "source_unreadable", segmentation_name=segmentation)


def ct_centre(node) -> list[float]:
    dims = np.array(node.GetImageData().GetDimensions())
    matrix = scene_nodes.ijk_to_ras(node)
    return (matrix @ np.array([*((dims - 1) / 2.0), 1.0]))[:3].round(3).tolist()


def test_vista3d_refuses_mr_missing_weights_and_bad_prompts(session, monkeypatch, tmp_path):
    registry, info = session
    monkeypatch.delenv(vista3d.BUNDLE_SETTING, raising=False)
    error = call_error(registry, "vista3d_segment", "weights_missing", volume_name="CT", label_prompt=["liver"])
    assert vista3d.BUNDLE_SETTING in error.error["message"]
    call_error(registry, "vista3d_segment", "wrong_modality", volume_name="lesion", label_prompt=["liver"])
    registry.context.engine.find_volume(volume_name="CT").SetAttribute("DICOM.Modality", "MR")
    call_error(registry, "vista3d_segment", "wrong_modality", volume_name="CT", label_prompt=["liver"])
    registry.context.engine.find_volume(volume_name="CT").SetAttribute("DICOM.Modality", "CT")
    call_error(registry, "vista3d_segment", "invalid_argument", volume_name="CT", label_prompt=["brain tumour"])
    call_error(registry, "vista3d_segment", "outside_volume", volume_name="CT", point_prompts_ras=[[900.0, 0, 0]])
    call_error(registry, "export_dicom_seg", "segmentation_not_found", segmentation_name="none")
    call_error(registry, "import_dicom_seg", "path_not_allowed", path=str(tmp_path / "x.dcm"), volume_name="CT")
    region = call_ok(registry, "segment_region", volume_name="lesion", seeds_ras=[info["lesion_centre"].tolist()],
                     size=64)
    call_error(registry, "export_dicom_seg", "not_dicom", segmentation_name=region.data["outputs"][
        "segmentation_name"])


def test_apply_transform_moves_the_segmentations_made_on_the_volume(session):
    registry, _ = session
    followup = registry.context.engine.find_volume(volume_name="followup")
    seed = ct_centre(followup)
    segmented = call_ok(registry, "segment_region", volume_name="followup", seeds_ras=[seed], method="threshold",
                        lower=-1e6, upper=1e6, segment_name="whole", size=64)
    segmentation = scene_nodes.find_segmentation(registry.context.engine.scene,
                                                 segmented.data["outputs"]["segmentation_name"])
    transform_id = call_ok(registry, "register_volumes", fixed_volume_ref="baseline",
                           moving_volume_ref="followup").data["transform_id"]
    applied = call_ok(registry, "apply_transform", volume_name="followup", transform_name=transform_id, size=64)
    moved = applied.data["outputs"]["moved_overlay_ids"]
    assert segmentation.GetID() in moved and len(moved) == 2  # the segmentation and its label-map display
    scene = registry.context.engine.scene
    assert all(scene.GetNodeByID(node_id).GetTransformNodeID() == transform_id for node_id in moved)

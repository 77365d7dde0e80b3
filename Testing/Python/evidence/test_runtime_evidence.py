"""Evidence tools: markups in RAS, validation against the displayed volume, export with checksums."""

from __future__ import annotations

import json

import numpy as np
import pytest
from runtime_data import lesion_center_ras, oblique_lps_affine, phantom, write_nifti

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.core.audit import AuditTrace, sha256_file, verify_trace


@pytest.fixture()
def registry(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    write_nifti(root / "T1c.nii.gz", phantom(0), oblique_lps_affine())
    trace = AuditTrace(tmp_path / "episode.jsonl", save_images=True)
    registry = build_slicer_registry([root], trace=trace, artifacts_dir=tmp_path / "artifacts")
    assert registry.call("open_case", {"dicom_dir": str(root)}).ok
    assert registry.call("jump", {"ras": lesion_center_ras(oblique_lps_affine()).tolist()}).ok
    return registry


def test_point_key_slices_roi_line_and_export(registry, tmp_path):
    center = lesion_center_ras(oblique_lps_affine()).round(3).tolist()
    point = registry.call("record_point", {"ras": center, "label": "enhancing lesion"})
    assert point.ok and point.data["ras"] == center
    node = registry.context.engine.scene.GetNodeByID(registry.context.evidence.items[0].node_id)
    assert node.IsA("vtkMRMLMarkupsFiducialNode")
    np.testing.assert_allclose(node.GetNthControlPointPositionWorld(0), center, atol=1e-3)

    slices = registry.call("record_key_slices", {"axial_mm": center[2]}).data
    assert slices["axial_mm"] == pytest.approx(center[2])
    assert slices["sagittal_mm"] == pytest.approx(center[0], abs=1e-3)

    box = registry.call("draw_roi", {"view": "axial", "shape": "box", "bbox_1000": [400, 400, 600, 600]})
    assert box.ok and box.data["center_ras"] == pytest.approx(center, abs=1.0)
    assert box.images and box.images[0].pixels.ndim == 3  # markups are drawn in colour
    polygon = registry.call("draw_roi", {"view": "coronal", "shape": "polygon",
                                         "points_1000": [[400, 400], [600, 400], [600, 600], [400, 600]]})
    circle = registry.call("draw_roi", {"view": "sagittal", "shape": "circle", "center_1000": [500, 500],
                                        "radius_1000": 100})
    assert polygon.data["area_mm2"] > 0 and circle.data["area_mm2"] > 0
    square_side = np.linalg.norm(np.subtract(polygon.data["points_ras"][0], polygon.data["points_ras"][1]))
    assert polygon.data["area_mm2"] == pytest.approx(square_side**2, rel=1e-3)

    line = registry.call("measure_line", {"start_ras": center, "end_ras": [center[0] + 3, center[1] + 4, center[2]]})
    assert line.data["length_mm"] == pytest.approx(5.0, abs=1e-3)
    bookmark = registry.call("bookmark_view", {"view": "axial", "label": "best slice"})
    assert bookmark.ok

    listed = registry.call("list_evidence").data["evidence"]
    assert [item["kind"] for item in listed] == ["point", "key_slices", "roi", "roi", "roi", "line", "bookmark"]

    exported = registry.call("export_evidence", {"name": "final"})
    assert exported.ok
    summary = json.loads((tmp_path / "artifacts" / "final" / "evidence.json").read_text())
    assert len(summary["evidence"]) == 7
    for artifact in exported.artifacts:
        assert sha256_file(artifact["path"]) == artifact["sha256"]
    markups = json.loads((tmp_path / "artifacts" / "final" / "ev1.mrk.json").read_text())["markups"][0]
    assert markups["coordinateSystem"] == "LPS"  # Slicer's file convention; the scene is RAS
    lps = markups["controlPoints"][0]["position"]
    assert [-lps[0], -lps[1], lps[2]] == pytest.approx(center, abs=1e-3)
    second = registry.call("export_evidence", {"name": "final"})
    assert second.data["folder"].endswith("final-2")  # a re-export never overwrites audited files
    assert verify_trace(registry.trace.path).ok


def test_evidence_bad_inputs(registry):
    assert registry.call("record_point", {"ras": [500, 0, 0]}).error["code"] == "outside_volume"
    assert registry.call("record_key_slices", {"axial_mm": 999}).error["code"] == "out_of_range"
    assert registry.call("draw_roi", {"view": "axial", "shape": "box", "bbox_1000": [600, 600, 400, 400]}).error[
        "code"] == "invalid_argument"
    assert registry.call("draw_roi", {"view": "axial", "shape": "box", "bbox_1000": [1, 1, 5, 5],
                                      "radius_1000": 3}).error["code"] == "invalid_argument"
    assert registry.call("draw_roi", {"view": "axial", "shape": "polygon", "points_1000": [[1, 1]]}).error[
        "code"] == "invalid_argument"
    assert registry.call("measure_line", {"view": "axial", "start_1000": [1, 1]}).error["code"] == "invalid_argument"
    assert registry.call("export_evidence", {"name": "../escape"}).error["code"] == "invalid_argument"
    assert registry.call("export_evidence").error["code"] == "no_evidence"
    assert registry.call("list_evidence").data["evidence"] == []
    assert registry.context.engine.scene.GetNumberOfNodesByClass("vtkMRMLMarkupsNode") == 0

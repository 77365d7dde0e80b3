"""0..999 arguments are read on the image the agent saw.

The 3D Slicer GUI resizes a slice node whenever its view widget is resized (qMRMLSliceControllerWidget::
setSliceViewSize calls vtkMRMLSliceLogic::ResizeSliceNode, a real slicer-core method called here exactly as the
GUI calls it), and a clinician may scroll or zoom between two agent turns. Every returned image carries the
geometry it was rendered with, and points are mapped through it, never through the live slice node.
"""

from __future__ import annotations

import numpy as np
import pytest
from runtime_data import (
    LESION_IJK,
    call_error,
    call_ok,
    lesion_center_ras,
    oblique_lps_affine,
    phantom,
    write_nifti,
)

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.viewer.geometry import screen_to_xy, vtk_to_numpy_matrix
from MedOpenClawLib.viewer.image_geometry import SliceImageGeometry


@pytest.fixture()
def registry(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    write_nifti(root / "T1c.nii.gz", phantom(1), oblique_lps_affine())
    registry = build_slicer_registry([root])
    call_ok(registry, "open_case", dicom_dir=str(root), size=128)
    # the lesion off the view centre, where a change of the field of view moves pixels the most
    call_ok(registry, "jump", ras=(lesion_center_ras(oblique_lps_affine()) + [10.0, -8.0, 0.0]).tolist())
    return registry


def bright_point_1000(pixels: np.ndarray) -> list[float]:
    """Centroid of the lesion's bright pixels on a rendered image, as a 0..999 point (read off the pixels; the
    white corner texts in the top and bottom tenth are left out)."""
    gray = (pixels if pixels.ndim == 2 else pixels.mean(axis=2)).astype(float)
    band = slice(gray.shape[0] // 10, gray.shape[0] - gray.shape[0] // 10)
    rows, cols = np.nonzero(gray[band] > 0.5 * (gray[band].max() + np.median(gray[band])))
    rows = rows + band.start
    height, width = gray.shape
    return [(cols.mean() + 0.5) * 1000.0 / width - 0.5, (rows.mean() + 0.5) * 1000.0 / height - 0.5]


def inside_lesion(ras) -> bool:
    ijk = np.linalg.inv(oblique_lps_affine()) @ np.array([*ras, 1.0])
    return all(s.start - 0.5 <= value <= s.stop - 0.5 for s, value in zip(LESION_IJK, ijk[:3]))


def live_node_mapping(registry, view, point):
    """What the old code did: map through the live slice node's dimensions and XY->RAS."""
    slice_node = registry.context.engine.logic(view).GetSliceNode()
    width, height = slice_node.GetDimensions()[:2]
    return (vtk_to_numpy_matrix(slice_node.GetXYToRAS()) @ np.array([*screen_to_xy(point, width, height), 0, 1]))[:3]


def test_every_image_carries_its_geometry(registry):
    result = call_ok(registry, "observe", size=256)
    ids = [image.image_id for image in result.images]
    assert len(set(ids)) == 3 and all(ids)
    for image in result.to_json(inline_images=False)["images"]:
        geometry = image["geometry"]
        assert geometry["width"] == image["width"] == 256 and np.shape(geometry["xy_to_ras"]) == (4, 4)
        assert geometry["slice_offset_mm"] == image["slice_offset_mm"]
    axial = result.images[0].geometry
    point = [123.0, 801.0]
    ras = axial.screen_to_ras(point)
    assert np.allclose(axial.ras_to_screen(ras), [*point, 0.0], atol=1e-6)
    # what an offline reader (report, replay) rebuilds from the JSON maps the same way, to the JSON's precision
    image_json = result.to_json(inline_images=False)["images"][0]
    rebuilt = SliceImageGeometry.from_json(image_json["geometry"], image_json["image_id"])
    assert rebuilt.image_id == axial.image_id and np.allclose(rebuilt.screen_to_ras(point), ras, atol=1e-4)
    col, row, distance = rebuilt.ras_to_pixel(ras)
    assert abs(distance) < 1e-6 and 0 <= col < 256 and 0 <= row < 256


def test_a_view_resized_behind_the_registrys_back_maps_the_pixel_the_agent_saw(registry):
    image = call_ok(registry, "observe", view="axial", size=256).images[0]
    point = bright_point_1000(image.pixels)
    before = call_ok(registry, "image_coords_to_ras", view="axial", point_1000=point).data
    assert inside_lesion(before["ras"]) and before["image_id"] == image.image_id and "warnings" not in before

    # what the GUI does when the clinician enlarges the red view to 900 x 600 pixels
    registry.context.engine.logic("axial").ResizeSliceNode(900, 600)
    stale = live_node_mapping(registry, "axial", point)
    # more than two voxels away: the old live-node mapping named another place
    assert np.linalg.norm(stale - np.array(before["ras"])) > 2.0, "the resize must move the live mapping"

    after = call_ok(registry, "image_coords_to_ras", view="axial", point_1000=point).data
    assert after["ras"] == pytest.approx(before["ras"], abs=1e-3)
    assert inside_lesion(after["ras"])
    (warning,) = after["warnings"]
    assert warning["code"] == "view_changed" and warning["image_id"] == image.image_id
    assert "field of view" in warning["message"]


def test_clinician_scrolls_between_turns_points_still_refer_to_the_image_seen(registry):
    image = call_ok(registry, "observe", view="axial", size=256).images[0]
    point = bright_point_1000(image.pixels)
    engine = registry.context.engine
    engine.set_offset("axial", engine.offset("axial") + 9.0)  # a human scrolls the red view
    data = call_ok(registry, "image_coords_to_ras", view="axial", point_1000=point).data
    assert inside_lesion(data["ras"])
    assert data["ras"][2] == pytest.approx(image.slice_offset_mm, abs=1e-3)
    assert "slice moved" in data["warnings"][0]["message"]


def test_rendering_restores_the_gui_views_own_shape(registry):
    logic = registry.context.engine.logic("axial")
    logic.ResizeSliceNode(900, 600)
    node = logic.GetSliceNode()
    shape = (tuple(node.GetDimensions()), tuple(node.GetFieldOfView()))
    image = call_ok(registry, "observe", view="axial", size=256).images[0]
    assert (image.width, image.height) == (256, 256)
    assert (tuple(node.GetDimensions()), tuple(node.GetFieldOfView())) == shape
    # the square image covers the whole wide view: its side is the view's larger field of view
    assert image.geometry.field_of_view_mm[:2] == pytest.approx((shape[1][0], shape[1][0]))
    point = bright_point_1000(image.pixels)
    data = call_ok(registry, "image_coords_to_ras", view="axial", point_1000=point).data
    assert inside_lesion(data["ras"]) and "warnings" not in data


def test_explicit_image_id_reads_an_older_image(registry):
    first = call_ok(registry, "observe", view="axial", size=256).images[0]
    point = bright_point_1000(first.pixels)
    call_ok(registry, "zoom", view="axial", factor=2.5)
    second = call_ok(registry, "observe", view="axial", size=256).images[0]
    on_first = call_ok(registry, "image_coords_to_ras", view="axial", point_1000=point, image_id=first.image_id)
    on_second = call_ok(registry, "image_coords_to_ras", view="axial", point_1000=point)
    assert on_first.data["image_id"] == first.image_id and on_second.data["image_id"] == second.image_id
    assert inside_lesion(on_first.data["ras"])
    assert np.linalg.norm(np.subtract(on_first.data["ras"], on_second.data["ras"])) > 1.0
    # a box drawn on the first image lands on the lesion too, and the evidence keeps that image's geometry
    x, y = point
    roi = call_ok(registry, "draw_roi", view="axial", shape="box", bbox_1000=[x - 15, y - 15, x + 15, y + 15],
                  image_id=first.image_id)
    assert inside_lesion(roi.data["center_ras"]) and roi.data["image_id"] == first.image_id
    item = registry.context.evidence.get(roi.data["evidence_id"])
    assert item.view_state["image"]["image_id"] == first.image_id
    assert item.view_state["image"]["xy_to_ras"] == first.geometry.to_json()["xy_to_ras"]


def test_bad_image_references_are_refused_and_change_nothing(registry, tmp_path):
    sagittal = call_ok(registry, "observe", view="sagittal", size=128).images[0]
    call_error(registry, "image_coords_to_ras", "unknown_image", view="axial", point_1000=[500, 500],
               image_id="img-999999")
    call_error(registry, "image_coords_to_ras", "invalid_argument", view="axial", point_1000=[500, 500],
               image_id=sagittal.image_id)
    call_error(registry, "zoom", "invalid_argument", view="axial", factor=2, center_1000=[1, 1],
               image_id="../etc")
    fresh = build_slicer_registry([tmp_path / "data"])
    call_ok(fresh, "open_case", dicom_dir=str(tmp_path / "data"), slice_planes=["sagittal"], size=64)
    error = call_error(fresh, "image_coords_to_ras", "no_image", view="axial", point_1000=[500, 500]).error
    assert "observe" in error["message"]


def test_images_of_a_failed_call_never_become_the_reference(registry):
    good = call_ok(registry, "observe", view="axial", size=128).images[0]
    engine = registry.context.engine
    checkpoint = engine.checkpoint()
    from MedOpenClawLib.viewer.rendering import render_view

    render_view(engine, "axial", 64)  # rendered by a call that then fails: the registry rolls back
    engine.rollback(checkpoint)
    data = call_ok(registry, "image_coords_to_ras", view="axial", point_1000=[500, 500]).data
    assert data["image_id"] == good.image_id
    assert call_ok(registry, "observe", view="axial", size=64).images[0].image_id != good.image_id

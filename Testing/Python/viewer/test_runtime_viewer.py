"""Viewer engine and Table 9 actions on a real slicer-core scene with synthetic volumes of known geometry."""

from __future__ import annotations

import numpy as np
import pytest
from runtime_data import (
    call_error,
    call_ok,
    lesion_center_ras,
    oblique_lps_affine,
    phantom,
    write_dicom_series,
    write_nifti,
)

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.viewer.geometry import VIEWS, vtk_to_numpy_matrix


@pytest.fixture()
def case(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    affine = oblique_lps_affine()
    write_nifti(root / "T1c.nii.gz", phantom(1), affine)
    write_nifti(root / "FLAIR.nii.gz", phantom(2), affine)
    return root, affine


@pytest.fixture()
def registry(case):
    root, _ = case
    registry = build_slicer_registry([root])
    assert registry.call("open_case", {"dicom_dir": str(root)}).ok
    assert registry.call("select_volume", {"volume_name": "T1c"}).ok
    return registry



def test_open_case_returns_inventory_and_baseline_views(case):
    root, _ = case
    registry = build_slicer_registry([root])
    result = call_ok(registry, "open_case", dicom_dir=str(root), size=256)
    assert sorted(result.data["loaded"]) == ["FLAIR", "T1c"]
    assert [image.view for image in result.images] == list(VIEWS)
    assert all(image.width == 256 and image.png_bytes().startswith(b"\x89PNG") for image in result.images)
    assert {volume["name"] for volume in result.data["volumes"]} == {"FLAIR", "T1c"}


def test_open_case_bad_inputs_leave_scene_unchanged(case, tmp_path):
    root, _ = case
    registry = build_slicer_registry([root])
    call_error(registry, "open_case", "path_not_allowed", dicom_dir="/etc")
    call_error(registry, "open_case", "path_not_allowed", dicom_dir=str(root / ".." / ".."))
    (root / "escape").symlink_to(tmp_path.parent)
    call_error(registry, "open_case", "path_not_allowed", dicom_dir=str(root / "escape"))
    call_error(registry, "open_case", "not_found", dicom_dir=str(root / "missing.nii.gz"))
    (root / "notes.txt").write_text("not an image")
    call_error(registry, "open_case", "unsupported_format", dicom_dir=str(root / "notes.txt"))
    (root / "broken.nii.gz").write_bytes(b"garbage")
    call_error(registry, "open_case", "unreadable_volume", dicom_dir=str(root / "broken.nii.gz"))
    assert registry.context.engine.volume_nodes() == []


def test_dicom_series_geometry_matches_nifti(tmp_path):
    affine = oblique_lps_affine()
    array = phantom(3)
    root = tmp_path / "data"
    root.mkdir()
    write_nifti(root / "ref.nii.gz", array, affine)
    write_dicom_series(root / "series", array, affine)
    registry = build_slicer_registry([root])
    call_ok(registry, "open_case", dicom_dir=str(root / "series"))
    engine = registry.context.engine
    dicom_node = engine.volume_nodes()[0]
    assert dicom_node.GetAttribute("DICOM.Modality") == "CT"
    np.testing.assert_allclose(engine_ijk_to_ras(dicom_node), affine, atol=1e-3)
    np.testing.assert_array_equal(engine.voxels(dicom_node), np.transpose(array, (2, 1, 0)))
    call_ok(registry, "open_case", dicom_dir=str(root / "ref.nii.gz"))
    nifti_node = engine.find_volume(volume_name="ref")
    np.testing.assert_allclose(engine_ijk_to_ras(nifti_node), affine, atol=1e-3)


def test_dicom_series_with_per_slice_rescale_keeps_real_values(tmp_path):
    """PET series store each slice with its own RescaleSlope; the loaded volume must hold the real values."""
    affine = oblique_lps_affine()
    rng = np.random.default_rng(5)
    values = rng.uniform(0, 12.0, (48, 40, 24))
    slopes = [float(slope) for slope in np.linspace(0.0004, 0.0009, 24)]
    write_dicom_series(tmp_path / "pet", values, affine, modality="PT", description="PET AC (WB/3D)", slopes=slopes)
    registry = build_slicer_registry([tmp_path])
    assert call_ok(registry, "open_case", dicom_dir=str(tmp_path / "pet")).data["loaded"] == ["PET_AC_WB_3D"]
    node = registry.context.engine.find_volume(volume_name="PET_AC_WB_3D")
    loaded = np.transpose(registry.context.engine.voxels(node), (2, 1, 0))
    np.testing.assert_allclose(loaded, values, atol=max(slopes) / 2 + 1e-6)


def engine_ijk_to_ras(node):
    from MedOpenClawLib.viewer.geometry import ijk_to_ras

    return ijk_to_ras(node)


def test_image_coords_to_ras_and_jump_round_trip_within_half_voxel(registry, case):
    _, affine = case
    spacing = np.linalg.norm(affine[:3, :3], axis=0)
    rng = np.random.default_rng(0)
    bounds = np.array(registry.context.engine.volume_summary(registry.context.engine.find_volume())["ras_bounds"])
    for _ in range(5):
        target = bounds[:, 0] + rng.uniform(0.3, 0.7, 3) * (bounds[:, 1] - bounds[:, 0])
        for view in VIEWS:
            call_ok(registry, "jump", ras=target.tolist(), view=view)
            for size in (256, 512):
                call_ok(registry, "observe", view=view, size=size)
                ras = np.array(call_ok(registry, "image_coords_to_ras", view=view, point_1000=[499.5, 499.5]).data[
                    "ras"])
                assert np.linalg.norm(ras - target) <= spacing.min() / 2, (view, size, ras, target)


def test_corner_overlay_offsets_equal_slice_logic_offsets(registry):
    engine = registry.context.engine
    call_ok(registry, "jump", ras=lesion_center_ras(oblique_lps_affine()).tolist())
    result = call_ok(registry, "observe", size=300)
    for image in result.images:
        slice_node = engine.logic(image.view).GetSliceNode()
        plane_origin = vtk_to_numpy_matrix(slice_node.GetSliceToRAS())[:3, 3]
        axis = {"axial": 2, "sagittal": 0, "coronal": 1}[image.view]
        assert image.slice_offset_mm == pytest.approx(plane_origin[axis], abs=1e-3)
        raw = engine.logic(image.view).GetSliceOffset()
        assert abs(image.slice_offset_mm) == pytest.approx(abs(raw), abs=1e-3)


def test_key_slice_bounds_from_offset_range(registry, case):
    _, affine = case
    corners = np.array([[i, j, k, 1] for i in (0, 47) for j in (0, 39) for k in (0, 23)]) @ affine.T
    for view, axis in (("axial", 2), ("sagittal", 0), ("coronal", 1)):
        data = call_ok(registry, "get_slice_offset_range", view=view).data
        assert data["min_mm"] == pytest.approx(corners[:, axis].min(), abs=1e-3)
        assert data["max_mm"] == pytest.approx(corners[:, axis].max(), abs=1e-3)
        call_ok(registry, "set_slice_offset", view=view, offset=data["max_mm"])
        call_error(registry, "set_slice_offset", "out_of_range", view=view, offset=data["max_mm"] + 50)


def test_fusion_shows_both_layers(registry):
    engine = registry.context.engine
    t1c = engine.find_volume(volume_name="T1c")
    # a black foreground (every voxel far below its window): blending must darken the background by half
    call_ok(registry, "wl", volume_name="FLAIR", window=1, level=1e6)
    plain = call_ok(registry, "observe", view="axial").images[0].pixels.astype(float)
    fused = call_ok(registry, "fusion", background_volume_ref="T1c", foreground_volume_ref="FLAIR",
                    foreground_opacity=0.5, view="axial")
    assert fused.data["foreground"] == "FLAIR"
    state = registry.context.state()["views"]["axial"]
    assert state["background"] == "T1c" and state["foreground"] == "FLAIR"
    fused_pixels = fused.images[0].pixels.astype(float)
    if fused_pixels.ndim == 3:
        fused_pixels = fused_pixels.mean(axis=2)
    if plain.ndim == 3:
        plain = plain.mean(axis=2)
    body = plain[60:-60, 60:-60] > 40
    ratio = fused_pixels[60:-60, 60:-60][body].mean() / plain[60:-60, 60:-60][body].mean()
    assert 0.35 < ratio < 0.65
    call_ok(registry, "fusion", background_volume_ref=t1c.GetID(), foreground_volume_ref=None)
    assert registry.context.state()["views"]["axial"]["foreground"] is None
    call_error(registry, "fusion", "volume_not_found", background_volume_ref="T1c", foreground_volume_ref="PET")
    call_error(registry, "fusion", "invalid_argument", background_volume_ref="T1c", foreground_volume_ref="T1c")


def test_window_level_and_presets(registry):
    result = call_ok(registry, "wl", window=200, level=120)
    assert result.data["window"] == 200 and not result.data["auto"]
    assert call_ok(registry, "wl", auto=True).data["auto"]
    assert call_ok(registry, "window_preset", preset="ct_lung").data["window"] == 1500
    mr = call_ok(registry, "window_preset", preset="mr_auto", volume_name="FLAIR").data
    assert 0 < mr["window"] < 2000
    pet = call_ok(registry, "window_preset", preset="pet_auto").data
    assert "PET" in pet["color"]
    assert pet["level"] - pet["window"] / 2 == pytest.approx(0.0, abs=1e-6)
    call_error(registry, "wl", "invalid_argument", window=-5)
    call_error(registry, "wl", "invalid_argument")
    call_error(registry, "wl", "invalid_argument", auto=True, window=10)
    call_error(registry, "window_preset", "invalid_argument", preset="ct_banana")


def test_scroll_zoom_fit_layout(registry):
    start = registry.context.engine.offset("axial")
    result = call_ok(registry, "scroll", view="axial", direction="up", num_slices=3)
    assert result.data["offsets_mm"][-1] == pytest.approx(start + 3 * 3.0 * np.cos(np.radians(8)), abs=0.2)
    cine = call_ok(registry, "scroll", view="axial", direction="down", num_slices=4, output="cine")
    assert len(cine.images) == 1 and cine.images[0].view == "montage"
    end = call_ok(registry, "scroll", view="axial", direction="down", num_slices=200)
    assert end.data["reached_end"]
    fov = registry.context.state()["views"]["coronal"]["field_of_view_mm"][0]
    zoomed = call_ok(registry, "zoom", view="coronal", factor=2, center_1000=[300, 700])
    assert zoomed.data["field_of_view_mm"][0] == pytest.approx(fov / 2, rel=1e-3)
    call_ok(registry, "fit", view="coronal")
    assert registry.context.state()["views"]["coronal"]["field_of_view_mm"][0] == pytest.approx(fov, rel=1e-3)
    assert [image.view for image in call_ok(registry, "set_layout", layout="one_up_sagittal").images] == ["sagittal"]
    assert [image.view for image in call_ok(registry, "observe").images] == ["sagittal"]
    call_error(registry, "scroll", "invalid_argument", view="axial", direction="sideways")
    call_error(registry, "zoom", "invalid_argument", view="axial", factor=0)
    call_error(registry, "set_layout", "invalid_argument", layout="seven_up")


def test_select_recover_state_and_bad_references(registry):
    call_ok(registry, "set_slice_offset", view="axial", offset=registry.context.engine.offset("axial") + 9)
    recovered = call_ok(registry, "recover_standard_views", volume_name="FLAIR")
    assert registry.context.state()["active_volume"] == "FLAIR" and len(recovered.images) == 3
    state = call_ok(registry, "get_viewer_state", include_volumes=False).data
    assert "volumes" not in state and state["views"]["axial"]["offset_mm"] is not None
    assert call_ok(registry, "select_volume", volume_name="t1c").data["active_volume"] == "T1c"
    call_error(registry, "select_volume", "volume_not_found", volume_name="DWI")
    call_error(registry, "select_volume", "invalid_argument")
    call_error(registry, "get_viewer_state", "invalid_argument", verbose=True)
    assert call_ok(registry, "ping").data["pong"]


def test_image_coords_to_ras_rejects_point_and_bbox_together(registry):
    call_error(registry, "image_coords_to_ras", "invalid_argument", view="axial", point_1000=[1, 2],
               bbox_1000=[1, 2, 3, 4])
    call_error(registry, "image_coords_to_ras", "invalid_argument", view="axial")
    call_error(registry, "image_coords_to_ras", "invalid_argument", view="axial", point_1000=[1200, 3])
    box = call_ok(registry, "image_coords_to_ras", view="axial", bbox_1000=[400, 400, 600, 600]).data
    point = call_ok(registry, "image_coords_to_ras", view="axial", point_1000=[500, 500]).data
    assert box["ras"] == point["ras"]


def test_lesion_is_found_where_the_geometry_says(registry):
    """The bright lesion voxels render at the screen point image_coords_to_ras maps to the lesion centre."""
    center = lesion_center_ras(oblique_lps_affine())
    call_ok(registry, "jump", ras=center.tolist())
    image = call_ok(registry, "observe", view="axial", size=512).images[0].pixels
    gray = image if image.ndim == 2 else image.mean(axis=2)
    assert gray[246:266, 246:266].mean() > 2 * gray[20:60, 200:300].mean()

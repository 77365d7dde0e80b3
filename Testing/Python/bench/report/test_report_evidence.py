"""The final evidence is drawn over the anatomy in the viewer's own orientation, through the viewer engine.

The fixture's lesion sits on the patient's right and its hidden mask is stored flipped left-right (a different
affine for the same anatomy): a drawing that followed the storage order would put the contour on the wrong side.
"""

from __future__ import annotations

import numpy as np
import pytest
from report_runs import lesion_case, lesion_centre_ras

from MedOpenClawLib.bench.cases import load_cases, load_ground_truth
from MedOpenClawLib.bench.report.evidence import (
    MASK_COLOUR,
    POINT_COLOUR,
    TRUTH_COLOUR,
    RadiologyEvidence,
    edge_letters,
)


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    cases_dir = lesion_case(tmp_path_factory.mktemp("evidence"))
    return load_cases(cases_dir)[0], load_ground_truth(cases_dir, "CASE-1")


def _parsed(ras, axial=None):
    return {"evidence": {"key_slice_axial_mm": ras[2] if axial is None else axial, "key_slice_sagittal_mm": ras[0],
                         "key_slice_coronal_mm": ras[1], "ras": ras}}


def _where(image, colour):
    pixels = np.asarray(image)
    return np.argwhere(np.all(pixels == np.array(colour, dtype=np.uint8), axis=-1))


def test_mask_contour_lies_on_the_lesion_in_radiological_orientation(package):
    case, truth = package
    ras = lesion_centre_ras()
    renderer = RadiologyEvidence(size=256)
    try:
        answered, reference = renderer.render(case, truth, _parsed(ras), records=[])
        views = {view.view: view for view in answered}
    finally:
        renderer.close()
    axial = views["axial"]
    assert axial.volume == "CASE-1_T1c" and axial.offset_mm == pytest.approx(ras[2], abs=1.0) and not axial.notes
    contour = _where(axial.image, MASK_COLOUR)
    assert len(contour) > 20
    centre_row, centre_column = contour.mean(axis=0)
    assert centre_column < 128  # patient right is on the image left (radiological convention, as the agent saw)
    grey = np.asarray(axial.image.convert("L"), dtype=float)
    inside = grey[int(centre_row) - 3 : int(centre_row) + 4, int(centre_column) - 3 : int(centre_column) + 4]
    assert np.median(inside) > 200  # the contour encloses the bright lesion of the rendered T1c
    cross = _where(axial.image, POINT_COLOUR)
    assert len(cross) and np.abs(cross.mean(axis=0) - [centre_row, centre_column]).max() < 6
    for view in ("sagittal", "coronal"):
        assert len(_where(views[view].image, MASK_COLOUR)) > 20
    assert reference == []  # every answered slice shows the lesion: no reference views
    # patient directions at the edges, from the image's own geometry: radiological axial has R on the left
    assert edge_letters(axial.geometry.xy_to_ras) == {"left": "R", "right": "L", "top": "A", "bottom": "P"}
    assert edge_letters(views["sagittal"].geometry.xy_to_ras) == {"left": "A", "right": "P", "top": "S",
                                                                  "bottom": "I"}


def test_viewer_state_and_off_slice_answers_are_shown_as_the_agent_left_them(package):
    case, truth = package
    ras = lesion_centre_ras()
    state = {"views": {"axial": {"background": "CASE-1_FLAIR", "orientation": "Axial",
                                 "field_of_view_mm": [40.0, 40.0], "center_ras": ras, "offset_mm": ras[2]}},
             "volumes": [{"name": "CASE-1_FLAIR", "window": 800.0, "level": 400.0, "auto": False}]}
    renderer = RadiologyEvidence(size=256)
    try:
        answered, reference = renderer.render(case, truth, _parsed(ras, axial=ras[2] + 10),
                                              [{"kind": "action", "state": state}])
        views = {view.view: view for view in answered}
    finally:
        renderer.close()
    axial = views["axial"]
    assert axial.volume == "CASE-1_FLAIR"  # the background the agent had, not the reference volume
    assert axial.offset_mm == pytest.approx(ras[2] + 10, abs=1.0)
    assert any("off this axial slice" in note for note in axial.notes)  # the answered point is drawn as a ring
    assert len(_where(axial.image, MASK_COLOUR)) == 0  # 10 mm above the lesion: no mask on this slice
    # zoomed to a 40 mm field of view around the lesion: the sagittal key-slice line crosses near the centre
    columns = np.argwhere(np.all(np.asarray(axial.image) == (235, 205, 50), axis=-1))[:, 1]
    assert len(columns) and abs(np.median(columns) - 128) < 12
    # the answer missed the lesion on the axial view: the reference views show where it is
    truth_views = {view.view: view for view in reference}
    assert set(truth_views) == {"axial", "sagittal", "coronal"}
    for view in truth_views.values():
        assert view.mask_pixels > 0 and len(_where(view.image, MASK_COLOUR)) > 0
    assert len(_where(truth_views["axial"].image, TRUTH_COLOUR)) > 0


def test_the_geometry_record_of_the_last_image_the_agent_saw_is_restored(package, tmp_path):
    """A real session: the agent zooms the axial view on the lesion; the evidence view has that image's plane
    and field of view (at the report's resolution), not a standard view."""
    from MedOpenClawLib.apps.radiology import build_headless_slicer_registry

    case, truth = package
    registry = build_headless_slicer_registry([str(case.data_root)])
    try:
        assert registry.call("open_case", {"dicom_dir": str(case.path(case.open_paths[0])), "size": 128}).ok
        zoomed = registry.call("zoom", {"view": "axial", "factor": 2.5, "center_1000": [300, 450], "size": 128})
        assert zoomed.ok, zoomed.error
        records = [{"kind": "action", "result": zoomed.to_json(inline_images=False), "state": registry.context.state()}]
    finally:
        registry.context.engine.app.close()
    seen = records[0]["result"]["images"][0]["geometry"]
    renderer = RadiologyEvidence(size=256)
    try:
        axial = renderer.render(case, truth, _parsed(lesion_centre_ras()), records)[0][0]
    finally:
        renderer.close()
    assert axial.view == "axial"
    assert np.allclose(axial.geometry.field_of_view_mm[:2], seen["field_of_view_mm"][:2], atol=1e-3)
    in_plane = np.array(seen["slice_to_ras"])[:3, 3] - axial.geometry.slice_to_ras[:3, 3]
    assert abs(in_plane[0]) < 1e-3 and abs(in_plane[1]) < 1e-3  # same pan; only the slice (S) moved
    assert axial.geometry.slice_offset_mm == pytest.approx(lesion_centre_ras()[2], abs=1.0)
    contour = _where(axial.image, MASK_COLOUR)
    assert len(contour) > 20  # the zoomed-in lesion outline, drawn through the rendered image's own geometry

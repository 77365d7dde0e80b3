"""Headless WSI viewer engine: slide access, geometry (zoom/pan units, clamping), render and point conversion."""

from __future__ import annotations

import math
import sys
from dataclasses import replace

import numpy as np
import pytest
from pathology_slides import BACKGROUND, MPP, REGIONS, SLIDE_SIZE

from MedOpenClawLib.core.result import ActionError
from MedOpenClawLib.pathology import geometry
from MedOpenClawLib.pathology.geometry import MIN_DOWNSAMPLE, ViewState
from MedOpenClawLib.pathology.render import overlay_layout, render_field
from MedOpenClawLib.pathology.slide import Slide
from MedOpenClawLib.pathology.viewer import HeadlessWsiViewer, PathologyViewer

VIEWPORT = (640, 480)


@pytest.fixture
def viewer(slide_path):
    engine = HeadlessWsiViewer(VIEWPORT)
    engine.load_image(slide_path)
    yield engine
    engine.close()


def test_slide_metadata_and_levels(slide_path):
    slide = Slide(slide_path)
    info = slide.info
    assert (info.width, info.height) == SLIDE_SIZE
    assert len(info.level_dimensions) == 3
    assert info.level_dimensions[1] == (1500, 1000)
    assert info.mpp == pytest.approx(MPP)
    assert info.base_magnification == pytest.approx(40.0)
    assert info.magnification_source == "mpp"
    assert info.best_level(1.0) == 0 and info.best_level(3.9) == 0 and info.best_level(4.0) == 1
    assert info.best_level(100.0) == 2
    slide.close()


def test_slide_reads_known_pixels_at_each_level(slide_path):
    slide = Slide(slide_path)
    (x0, y0, x1, y1), colour = REGIONS["red"]
    for level, downsample in enumerate((1, 4, 16)):
        block = slide.read_level(level, x0 // downsample + 2, y0 // downsample + 2, 3, 3)
        assert (block == colour).all(), level
    # outside the slide: background fill, no error
    outside = slide.read_level(0, -50, -50, 40, 40)
    assert (outside == 255).all()
    slide.close()


def test_tile_cache_and_single_level_reads(slide_path):
    engine = HeadlessWsiViewer(VIEWPORT)
    engine.load_image(slide_path)  # reads the coarsest level for the overview thumbnail
    slide = engine.slide
    slide.levels_read.clear()
    engine.zoom("in", 2, "factor", None, None)  # downsample 6.25 -> level 1 (downsample 4)
    engine.capture("a")
    assert slide.levels_read == {1}
    reads = slide.tile_reads
    engine.capture("b")
    assert slide.tile_reads == reads, "a repeated render must be served from the tile cache"
    engine.close()


def test_tiffslide_fallback_reads_the_same_pixels(slide_path, monkeypatch):
    reference = Slide(slide_path)
    assert reference.info.backend == "openslide"
    monkeypatch.setitem(sys.modules, "openslide", None)  # import openslide -> ImportError
    fallback = Slide(slide_path)
    assert fallback.info.backend == "tiffslide"
    assert fallback.info.level_dimensions == reference.info.level_dimensions
    for level in range(3):
        window = (level, 37, 21, 300, 200)
        assert np.array_equal(reference.read_level(*window), fallback.read_level(*window))
    reference.close()
    fallback.close()


@pytest.mark.parametrize(
    "path, code",
    [("/nonexistent/slide.tif", "not_found"), ("NOT_A_SLIDE", "unreadable_image")],
)
def test_bad_image_path_is_a_clear_error(slide_root, slide_path, path, code):
    engine = HeadlessWsiViewer(VIEWPORT)
    engine.load_image(slide_path)
    before = engine.view_state()
    target = str(slide_root / "not_a_slide.tif") if path == "NOT_A_SLIDE" else path
    with pytest.raises(ActionError) as raised:
        engine.load_image(target)
    assert raised.value.code == code
    assert "slide" in raised.value.message or "open" in raised.value.message
    assert engine.view_state() == before
    engine.close()


def test_open_shows_whole_slide_centred(viewer):
    state = viewer.view_state()
    assert (state.centre_x, state.centre_y) == (3000.0, 2000.0)
    assert state.downsample == pytest.approx(max(6000 / 640, 4000 / 480))
    assert state.max_downsample == state.downsample
    assert isinstance(viewer, PathologyViewer)


def test_zoom_units(viewer):
    start = viewer.view_state().downsample
    assert viewer.zoom("in", 2, "factor", None, None).downsample == pytest.approx(start / 2)
    assert viewer.zoom("out", 1.5, "factor", None, None).downsample == pytest.approx(start / 2 * 1.5)
    before = viewer.view_state().downsample
    assert viewer.zoom("in", 2, "steps", None, None).downsample == pytest.approx(before / 2)  # 2 steps of sqrt 2
    assert viewer.zoom("out", 1, "steps", None, None).downsample == pytest.approx(before / 2 * math.sqrt(2))
    # magnification: absolute, base 40x from 0.25 um/px
    assert viewer.zoom(None, 10, "magnification", None, None).downsample == pytest.approx(4.0)
    assert viewer.zoom("out", 20, "magnification", None, None).downsample == pytest.approx(2.0)


def test_zoom_recentres_on_screenshot_point(viewer):
    state = viewer.view_state()
    target = state.normalised_to_wsi(250, 750)
    after = viewer.zoom("in", 4, "factor", 250, 750)
    assert (after.centre_x, after.centre_y) == pytest.approx(target)
    assert after.downsample == pytest.approx(state.downsample / 4)


def test_pan_units(viewer):
    viewer.zoom("in", 4, "factor", None, None)
    state = viewer.view_state()
    ds = state.downsample
    after = viewer.pan("right", 0.5, "viewport", None, None)
    assert after.centre_x == pytest.approx(state.centre_x + 0.5 * VIEWPORT[0] * ds)
    after2 = viewer.pan("down", 100, "screen_px", None, None)
    assert after2.centre_y == pytest.approx(state.centre_y + 100 * ds)
    after3 = viewer.pan("left", 300, "wsi_px", None, None)
    assert after3.centre_x == pytest.approx(after.centre_x - 300)
    after4 = viewer.pan("up", 0.25, "viewport", None, None)
    assert after4.centre_y == pytest.approx(after2.centre_y - 0.25 * VIEWPORT[1] * ds)
    target = after4.normalised_to_wsi(900, 100)
    recentred = viewer.pan(None, None, "viewport", 900, 100)
    assert (recentred.centre_x, recentred.centre_y) == pytest.approx(target)
    assert recentred.downsample == ds


def test_clamping_at_slide_bounds(viewer):
    fit = viewer.view_state().max_downsample
    assert viewer.zoom("out", 1000, "factor", None, None).downsample == pytest.approx(fit)
    assert viewer.zoom("in", 1024, "factor", None, None).downsample == MIN_DOWNSAMPLE
    assert viewer.zoom("in", 1000, "magnification", None, None).downsample == MIN_DOWNSAMPLE
    state = viewer.pan("left", 10**7, "wsi_px", None, None)
    assert state.centre_x == 0.0
    state = viewer.pan("down", 10**6, "viewport", None, None)
    assert state.centre_y == SLIDE_SIZE[1]
    # recentring on a point beyond the bottom-left corner stops at the corner, not beyond it
    state = viewer.pan(None, None, "viewport", 0, 999)
    assert (state.centre_x, state.centre_y) == (0.0, SLIDE_SIZE[1])


@pytest.mark.parametrize(
    "args, message",
    [
        (("in", 2, "furlongs", None, None), "unit"),
        (("sideways", 2, "factor", None, None), "direction"),
        ((None, 2, "factor", None, None), "direction"),
        (("in", 1, "factor", None, None), "factor"),
        (("in", 0.5, "factor", None, None), "factor"),
        (("in", 1.5, "steps", None, None), "steps"),
        (("in", -2, "factor", None, None), "positive"),
        (("in", float("nan"), "factor", None, None), "positive"),
        (("in", 2, "factor", 10, None), "both"),
        (("in", 2, "factor", 10, 1000), "outside"),
    ],
)
def test_zoom_bad_input_changes_nothing(viewer, args, message):
    before = viewer.view_state()
    with pytest.raises(ActionError) as raised:
        viewer.zoom(*args)
    assert message in raised.value.message
    assert viewer.view_state() == before


@pytest.mark.parametrize(
    "args, message",
    [
        (("north", 1, "viewport", None, None), "direction"),
        (("left", 1, "miles", None, None), "unit"),
        (("left", None, "viewport", None, None), "amount"),
        (("left", 0, "viewport", None, None), "positive"),
        (("left", 1, "viewport", 5, 5), "not both"),
        ((None, None, "viewport", -1, 5), "outside"),
    ],
)
def test_pan_bad_input_changes_nothing(viewer, args, message):
    before = viewer.view_state()
    with pytest.raises(ActionError) as raised:
        viewer.pan(*args)
    assert message in raised.value.message
    assert viewer.view_state() == before


def test_magnification_unit_needs_metadata(slide_root):
    engine = HeadlessWsiViewer(VIEWPORT)
    engine.load_image(str(slide_root / "case_plain" / "plain.tif"))
    assert engine.slide_info().base_magnification is None
    with pytest.raises(ActionError) as raised:
        engine.zoom(None, 10, "magnification", None, None)
    assert raised.value.code == "magnification_unknown"
    engine.close()


VIEWS = [  # (zoom factor in from whole-slide, pan in wsi px (dx, dy)) -> several downsamples and pyramid levels
    (1.0, (0, 0)),
    (2.0, (-1700, -1300)),
    (5.0, (-1800, -1250)),
    (13.0, (-1800, -1250)),
    (40.0, (2020, -1180)),
]


def _apply(viewer, factor, shift):
    if factor > 1:
        viewer.zoom("in", factor, "factor", None, None)
    for direction, amount in (("right", shift[0]), ("down", shift[1])):
        if amount:
            viewer.pan(direction if amount > 0 else {"right": "left", "down": "up"}[direction], abs(amount), "wsi_px",
                       None, None)
    return viewer.view_state()


@pytest.mark.parametrize("factor, shift", VIEWS)
def test_viewer_point_to_wsi_coordinate_is_exact(viewer, factor, shift):
    """Converted points land within 1 level-0 px x downsample of the known region corners and centres."""
    state = _apply(viewer, factor, shift)
    ds = state.downsample
    # analytic: the normalised point n maps to the centre of the n-th thousandth of the screenshot
    x, y = viewer.viewer_point_to_wsi_coordinate(0, 999)
    assert x == pytest.approx(state.centre_x + (0.5 * VIEWPORT[0] / 1000 - VIEWPORT[0] / 2) * ds)
    assert y == pytest.approx(state.centre_y + ((999.5) * VIEWPORT[1] / 1000 - VIEWPORT[1] / 2) * ds)
    checked = 0
    for (x0, y0, x1, y1), _ in REGIONS.values():
        for target in ((x0, y0), ((x0 + x1) / 2, (y0 + y1) / 2), (x1 - 1, y1 - 1)):
            nx, ny = state.wsi_to_normalised(*target)
            if not (0 <= nx <= 999 and 0 <= ny <= 999):
                continue
            wx, wy = viewer.viewer_point_to_wsi_coordinate(round(nx), round(ny))
            assert abs(wx - target[0]) <= ds and abs(wy - target[1]) <= ds, (target, wx, wy, ds)
            checked += 1
    assert checked >= 3


@pytest.mark.parametrize("factor, shift", VIEWS[1:])
def test_render_shows_regions_where_the_conversion_says(viewer, factor, shift):
    """Region edges in the rendered field sit where the geometry puts them (within 1.5 screen px)."""
    state = _apply(viewer, factor, shift)
    pixels = render_field(viewer.slide, state).astype(int)
    checked = 0
    for (x0, y0, x1, y1), colour in REGIONS.values():
        sx0 = (x0 - state.centre_x) / state.downsample + VIEWPORT[0] / 2
        sx1 = (x1 - state.centre_x) / state.downsample + VIEWPORT[0] / 2
        sy0 = (y0 - state.centre_y) / state.downsample + VIEWPORT[1] / 2
        sy1 = (y1 - state.centre_y) / state.downsample + VIEWPORT[1] / 2
        if sx1 - sx0 < 6 or sy1 - sy0 < 6 or sx0 < 2 or sy0 < 2 or sx1 > VIEWPORT[0] - 2 or sy1 > VIEWPORT[1] - 2:
            continue  # too small or not fully on screen at this view
        row = pixels[int((sy0 + sy1) / 2)]
        is_region = np.abs(row - np.array(colour)).sum(axis=1) < np.abs(row - BACKGROUND).sum(axis=1)
        columns = np.flatnonzero(is_region)
        assert abs(columns[0] - sx0) <= 1.5 and abs(columns[-1] + 1 - sx1) <= 1.5, (colour, columns[[0, -1]], sx0, sx1)
        checked += 1
    assert checked >= 1


def test_capture_has_overlays_and_correct_size(viewer):
    image = viewer.capture("overview")
    assert (image.width, image.height) == VIEWPORT and image.pixels.shape == (VIEWPORT[1], VIEWPORT[0], 3)
    layout = overlay_layout(viewer.view_state())
    x0, y0, x1, y1 = layout["overview"]
    inset = image.pixels[y0:y1, x0:x1].astype(int)
    assert (np.abs(inset - (230, 20, 20)).sum(axis=2) < 60).any(), "the field rectangle is drawn in the inset"
    tx0, ty0, tx1, ty1 = layout["magnification_text"]
    assert (image.pixels[ty0:ty1, tx0:tx1] == 255).any() and (image.pixels[ty0:ty1, tx0:tx1] < 40).any()
    assert image.png_bytes().startswith(b"\x89PNG")


def test_restore_returns_to_a_previous_image_and_view(viewer, slide_root):
    viewer.zoom("in", 3, "factor", 100, 100)
    saved = viewer.view_state()
    viewer.load_image(str(slide_root / "case_plain" / "plain.tif"))
    viewer.restore(saved)
    assert viewer.view_state() == saved and viewer.slide_info().width == SLIDE_SIZE[0]
    viewer.close()
    assert not viewer.view_state().has_image
    with pytest.raises(ActionError) as raised:
        viewer.zoom("in", 2, "factor", None, None)
    assert raised.value.code == "no_image"


def test_geometry_round_trip_and_field():
    state = replace(ViewState(image_path="x", width=1000, height=800), centre_x=400.0, centre_y=300.0, downsample=2.0)
    x, y = state.normalised_to_wsi(123, 456)
    assert state.wsi_to_normalised(x, y) == pytest.approx((123, 456))
    x0, y0, x1, y1 = state.field()
    assert (x1 - x0, y1 - y0) == (1024 * 2.0, 768 * 2.0)
    assert geometry.check_normalised_point(None, None) is None

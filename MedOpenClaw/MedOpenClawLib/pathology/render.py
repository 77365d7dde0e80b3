"""Screenshot-like render of the current whole-slide field: tissue, magnification text, scale bar, overview inset.

The overlays sit in fixed panels whose rectangles (:func:`overlay_layout`) are published in the viewer state, so
agents and the rule-based GUI summary can tell which screenshot points are tissue and which are overlay.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ..core.result import RenderedImage
from .geometry import NORMALISED_SPAN, ViewState
from .slide import Slide, SlideInfo

PANEL_MARGIN = 8
TEXT_PANEL = (300, 24)  # width, height of the magnification text panel (top-left)
SCALE_PANEL = (200, 30)  # width, height of the scale-bar panel (bottom-left)
OVERVIEW_WIDTH_FRACTION = 0.2
OVERVIEW_MAX_HEIGHT_FRACTION = 0.3
THUMBNAIL_SIZE = 512
FIELD_COLOUR = (230, 20, 20)
PANEL_COLOUR = (20, 20, 20)
TEXT_COLOUR = (255, 255, 255)
_FONT = None


def _font() -> ImageFont.ImageFont:
    global _FONT
    if _FONT is None:
        _FONT = ImageFont.load_default(size=14)
    return _FONT


def overlay_layout(state: ViewState) -> dict[str, tuple[int, int, int, int]]:
    """Screen-pixel rectangles (x0, y0, x1, y1) of the overlays for this view; empty without an image."""
    if not state.has_image:
        return {}
    vw, vh = state.viewport_width, state.viewport_height
    inset_width = max(16, round(vw * OVERVIEW_WIDTH_FRACTION))
    inset_height = max(1, round(inset_width * state.height / state.width))
    if inset_height > vh * OVERVIEW_MAX_HEIGHT_FRACTION:
        inset_height = max(16, round(vh * OVERVIEW_MAX_HEIGHT_FRACTION))
        inset_width = max(1, round(inset_height * state.width / state.height))
    return {
        "magnification_text": (0, 0, min(TEXT_PANEL[0], vw), min(TEXT_PANEL[1], vh)),
        "scale_bar": (0, max(0, vh - SCALE_PANEL[1]), min(SCALE_PANEL[0], vw), vh),
        "overview": (vw - inset_width - PANEL_MARGIN, PANEL_MARGIN, vw - PANEL_MARGIN, PANEL_MARGIN + inset_height),
    }


def normalised_rect(rect: tuple[int, int, int, int], state: ViewState) -> list[int]:
    """A screen rectangle in the 0..999 screenshot coordinates agents use."""
    x0, y0, x1, y1 = rect
    sx, sy = NORMALISED_SPAN / state.viewport_width, NORMALISED_SPAN / state.viewport_height
    return [
        math.floor(x0 * sx),
        math.floor(y0 * sy),
        min(NORMALISED_SPAN - 1, math.ceil(x1 * sx) - 1),
        min(NORMALISED_SPAN - 1, math.ceil(y1 * sy) - 1),
    ]


def render_field(slide: Slide, state: ViewState) -> np.ndarray:
    """The viewport's RGB pixels, resampled from the one pyramid level at or just finer than the downsample."""
    info = slide.info
    level = info.best_level(state.downsample)
    level_downsample = info.level_downsamples[level]
    x0, y0, x1, y1 = (value / level_downsample for value in state.field())
    read_x0, read_y0 = math.floor(x0), math.floor(y0)
    read_x1, read_y1 = math.ceil(x1) + 1, math.ceil(y1) + 1
    pixels = slide.read_level(level, read_x0, read_y0, read_x1 - read_x0, read_y1 - read_y0)
    box = (x0 - read_x0, y0 - read_y0, x1 - read_x0, y1 - read_y0)
    image = Image.fromarray(pixels).resize(
        (state.viewport_width, state.viewport_height), Image.Resampling.BILINEAR, box=box
    )
    return np.asarray(image)


def _nice_length(target: float) -> float:
    """Largest 1-2-5 x 10^k value not above ``target``."""
    exponent = math.floor(math.log10(target))
    for mantissa in (5, 2, 1):
        value = mantissa * 10.0**exponent
        if value <= target:
            return value
    return 10.0**exponent


def _format_length(value: float, unit: str) -> str:
    if unit == "um" and value >= 1000:
        return f"{value / 1000:g} mm"
    return f"{value:g} {unit}"


def magnification_text(state: ViewState, info: SlideInfo) -> str:
    if info.base_magnification:
        return f"{info.base_magnification / state.downsample:.2f}x   downsample {state.downsample:.2f}"
    return f"magnification n/a   downsample {state.downsample:.2f}"


def _draw_scale_bar(draw: ImageDraw.ImageDraw, rect, state: ViewState, info: SlideInfo) -> None:
    x0, y0, x1, y1 = rect
    draw.rectangle(rect, fill=PANEL_COLOUR)
    per_screen_px, unit = (state.downsample * info.mpp, "um") if info.mpp else (state.downsample, "px")
    length = _nice_length(0.6 * (x1 - x0 - 2 * PANEL_MARGIN) * per_screen_px)
    bar = max(1, round(length / per_screen_px))
    bar_y = y1 - 8
    draw.rectangle((x0 + PANEL_MARGIN, bar_y - 3, x0 + PANEL_MARGIN + bar, bar_y), fill=TEXT_COLOUR)
    draw.text((x0 + PANEL_MARGIN, y0 + 1), _format_length(length, unit), fill=TEXT_COLOUR, font=_font())


def _draw_overview(canvas: Image.Image, draw: ImageDraw.ImageDraw, rect, state: ViewState, thumbnail) -> None:
    x0, y0, x1, y1 = rect
    inset = Image.fromarray(thumbnail).resize((x1 - x0, y1 - y0), Image.Resampling.BILINEAR)
    canvas.paste(inset, (x0, y0))
    draw.rectangle((x0 - 1, y0 - 1, x1, y1), outline=PANEL_COLOUR)
    scale_x, scale_y = (x1 - x0) / state.width, (y1 - y0) / state.height
    fx0, fy0, fx1, fy1 = state.field()
    left = x0 + max(fx0, 0.0) * scale_x
    top = y0 + max(fy0, 0.0) * scale_y
    right = x0 + min(fx1, state.width) * scale_x
    bottom = y0 + min(fy1, state.height) * scale_y
    if right - left < 4 or bottom - top < 4:  # a field too small to outline: mark it with a cross
        cx, cy = x0 + state.centre_x * scale_x, y0 + state.centre_y * scale_y
        draw.line((cx - 5, cy, cx + 5, cy), fill=FIELD_COLOUR, width=2)
        draw.line((cx, cy - 5, cx, cy + 5), fill=FIELD_COLOUR, width=2)
    else:
        draw.rectangle((left, top, right, bottom), outline=FIELD_COLOUR, width=2)


def render_view(slide: Slide, state: ViewState, thumbnail: np.ndarray, view: str = "wsi") -> RenderedImage:
    """The screenshot an agent sees: the field plus the overlays of :func:`overlay_layout`."""
    canvas = Image.fromarray(render_field(slide, state))
    draw = ImageDraw.Draw(canvas)
    layout = overlay_layout(state)
    draw.rectangle(layout["magnification_text"], fill=PANEL_COLOUR)
    draw.text((PANEL_MARGIN, 4), magnification_text(state, slide.info), fill=TEXT_COLOUR, font=_font())
    _draw_scale_bar(draw, layout["scale_bar"], state, slide.info)
    _draw_overview(canvas, draw, layout["overview"], state, thumbnail)
    return RenderedImage(view=view, width=state.viewport_width, height=state.viewport_height, pixels=np.asarray(canvas))

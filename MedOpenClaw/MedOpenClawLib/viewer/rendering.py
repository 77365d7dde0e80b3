"""Observations: a slice view rendered from the slice logic's blended layers, with markups drawn on top and
a corner overlay printing the volume name and the canonical RAS offset the agent must report as key slices.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ..core.result import RenderedImage
from .engine import ViewerEngine
from .geometry import AXIS_LETTER
from .image_geometry import SliceImageGeometry

MARKUP_COLORS = {
    "vtkMRMLMarkupsFiducialNode": (255, 220, 0),
    "vtkMRMLMarkupsLineNode": (0, 255, 120),
    "vtkMRMLMarkupsClosedCurveNode": (0, 200, 255),
    "vtkMRMLMarkupsROINode": (255, 80, 200),
}
_FONTS: dict[int, ImageFont.ImageFont] = {}


def font(size: int) -> ImageFont.ImageFont:
    if size not in _FONTS:
        _FONTS[size] = ImageFont.load_default(size=size)
    return _FONTS[size]


def overlay_text(view: str, volume_name: str | None, offset_mm: float) -> tuple[str, str]:
    """Top-left and bottom-left corner texts; the bottom line is the key-slice value, e.g. ``S: 12.50 mm``."""
    return volume_name or "(no volume)", f"{AXIS_LETTER[view]}: {offset_mm:.2f} mm"


def markups_nodes(scene) -> list:
    nodes = []
    for index in range(scene.GetNumberOfNodesByClass("vtkMRMLMarkupsNode")):
        node = scene.GetNthNodeByClass(index, "vtkMRMLMarkupsNode")
        display = node.GetDisplayNode()
        has_geometry = node.IsA("vtkMRMLMarkupsROINode") or node.GetNumberOfControlPoints()
        if has_geometry and (display is None or display.GetVisibility()):
            nodes.append(node)
    return nodes


def control_points(node) -> np.ndarray:
    return np.array([node.GetNthControlPointPositionWorld(i) for i in range(node.GetNumberOfControlPoints())])


def draw_markups(engine: ViewerEngine, geometry: SliceImageGeometry, draw: ImageDraw.ImageDraw) -> bool:
    """Draw markups lying on (or crossing) the image's slice; returns whether anything was drawn."""
    tolerance = max(geometry.field_of_view_mm[2] / 2.0, 0.5)
    drawn = False
    for node in markups_nodes(engine.scene):
        color = next((c for cls, c in MARKUP_COLORS.items() if node.IsA(cls)), (255, 255, 255))
        if node.IsA("vtkMRMLMarkupsROINode"):
            drawn |= _draw_roi(geometry, node, draw, color)
            continue
        projected = np.array([geometry.ras_to_pixel(point) for point in control_points(node)])
        pixels = [(col, row) for col, row, _ in projected]
        on_plane = np.abs(projected[:, 2]) <= tolerance
        if node.IsA("vtkMRMLMarkupsFiducialNode"):
            for (col, row), visible in zip(pixels, on_plane):
                if visible:
                    draw.ellipse([col - 4, row - 4, col + 4, row + 4], outline=color, width=2)
                    drawn = True
        elif on_plane.all():
            closed = node.IsA("vtkMRMLMarkupsClosedCurveNode")
            draw.line(pixels + pixels[:1] if closed else pixels, fill=color, width=2)
            drawn = True
    return drawn


def _draw_roi(geometry: SliceImageGeometry, node, draw, color) -> bool:
    center, size_mm = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
    node.GetCenterWorld(center)
    node.GetSizeWorld(size_mm)
    center, radius = np.array(center), np.array(size_mm) / 2.0
    distance = geometry.ras_to_xy(center)[2]
    normal_extent = float(np.abs(geometry.normal) @ radius)
    if abs(distance) > normal_extent + 1e-6:
        return False
    corners = [center + np.array([sx, sy, sz]) * radius for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
    pixels = np.array([geometry.ras_to_pixel(corner)[:2] for corner in corners])
    draw.rectangle([*pixels.min(axis=0), *pixels.max(axis=0)], outline=color, width=2)
    return True


def over_black(rgba: np.ndarray) -> Image.Image:
    """The blended layers composited over black: outside the volume the slice logic's pixels are transparent
    (alpha 0) but still carry the lookup-table colour of value 0 (grey on CT), which must not show."""
    image = Image.fromarray(rgba, "RGBA")
    alpha = image.getchannel("A")
    if alpha.getextrema()[0] == 255:  # nothing transparent: a plain conversion (the common, fast case)
        return image.convert("RGB")
    composite = Image.new("RGB", image.size)
    composite.paste(image, mask=alpha)
    return composite


def render_view(engine: ViewerEngine, view: str, size: int, returned: bool = True) -> RenderedImage:
    """Reslice, draw markups and the corner overlay; grayscale output when nothing coloured is shown.

    The image carries the geometry it was rendered with; ``returned`` images become the session's reference
    for later 0..999 arguments on ``view`` (a frame that only goes into a montage is not). During a replay
    (``engine.render_pixels`` off) it carries the geometry alone.
    """
    rgba, geometry = engine.render_slice(view, size)
    pixels = None if rgba is None else picture(engine, view, size, rgba, geometry)
    rendered = RenderedImage(view=view, width=geometry.width, height=geometry.height,
                             slice_offset_mm=round(geometry.slice_offset_mm, 3), pixels=pixels, geometry=geometry)
    if returned:
        engine.images.returned([rendered])
        rendered.encode_ahead()  # while the answer's next view renders
    return rendered


def picture(engine: ViewerEngine, view: str, size: int, rgba: np.ndarray, geometry: SliceImageGeometry) -> np.ndarray:
    """The resliced layers over black with the markups and the corner overlay drawn in."""
    image = over_black(rgba)
    state = engine.view_state(view)
    grayscale = engine.shows_only_grey(view)
    draw = ImageDraw.Draw(image)
    if draw_markups(engine, geometry, draw):
        grayscale = False
    top, bottom = overlay_text(view, state["background"], geometry.slice_offset_mm)
    if state["foreground"]:
        top += f" + {state['foreground']} ({state['foreground_opacity']:.0%})"
    text_size = max(10, size // 32)
    margin = max(3, size // 100)
    for text, anchor_y, anchor in ((top, margin, "la"), (bottom, size - margin, "ld")):
        draw.text((margin, anchor_y), text, fill=(255, 255, 255), font=font(text_size), anchor=anchor,
                  stroke_width=1, stroke_fill=(0, 0, 0))
    # white-on-black text keeps a grayscale view grayscale: one channel encodes about 3x faster
    return np.asarray(image.getchannel(0) if grayscale else image)


def montage(images: list[RenderedImage], columns: int | None = None, tile: int = 256) -> RenderedImage:
    """Tile rendered views (each already carries its offset overlay) into one contact sheet."""
    columns = columns or math.ceil(math.sqrt(len(images)))
    rows = math.ceil(len(images) / columns)
    if any(rendered.pixels is None for rendered in images):  # frames of a replay: no picture to tile
        return RenderedImage(view="montage", width=columns * tile, height=rows * tile)
    sheet = Image.new("RGB", (columns * tile, rows * tile))
    for index, rendered in enumerate(images):
        frame = Image.fromarray(rendered.pixels).convert("RGB").resize((tile, tile), Image.BILINEAR)
        sheet.paste(frame, ((index % columns) * tile, (index // columns) * tile))
    return RenderedImage(view="montage", width=sheet.width, height=sheet.height, pixels=np.asarray(sheet))

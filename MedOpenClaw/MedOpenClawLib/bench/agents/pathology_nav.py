"""Whole-slide navigation for scripted agents: bring a level-0 point into view and read its coordinate back
through ``viewer_point_to_wsi_coordinate`` -- one tool call per round, as the pathology protocol requires."""

from __future__ import annotations

from .base import Plan

NORMALISED_SPAN = 1000.0
ZOOM_IN_FACTOR = 4.0


def screen_point(view: dict, x: float, y: float) -> tuple[float, float]:
    """Where level-0 pixel (x, y) appears on the screenshot, in 0..999 (inverse of the viewer's mapping)."""
    sx = (x - view["centre_x"]) / view["downsample"] + view["viewport_width"] / 2.0
    sy = (y - view["centre_y"]) / view["downsample"] + view["viewport_height"] / 2.0
    nx = sx * NORMALISED_SPAN / view["viewport_width"] - 0.5
    ny = sy * NORMALISED_SPAN / view["viewport_height"] - 0.5
    return min(max(nx, 0.0), NORMALISED_SPAN - 1), min(max(ny, 0.0), NORMALISED_SPAN - 1)


def locate_wsi_point(point: list[float]) -> Plan:
    """Zoom in centred on ``point``, capture the view as evidence, and convert the point's screen position
    back to WSI pixels; returns ``[x, y]`` from the tool, or None when a step failed."""
    focused = (yield [("focus_qupath", {})])[0]
    if not focused.get("ok"):
        return None
    nx, ny = screen_point(focused["data"]["state"]["view"], *point)
    zoomed = (yield [("zoom", {"direction": "in", "amount": ZOOM_IN_FACTOR, "unit": "factor", "x": nx, "y": ny})])[0]
    if not zoomed.get("ok"):
        return None
    nx, ny = screen_point(zoomed["data"]["state"]["view"], *point)
    yield [("capture_viewer", {"label": "evidence region"})]
    converted = (yield [("viewer_point_to_wsi_coordinate", {"x": nx, "y": ny})])[0]
    if not converted.get("ok"):
        return None
    return [converted["data"]["x"], converted["data"]["y"]]

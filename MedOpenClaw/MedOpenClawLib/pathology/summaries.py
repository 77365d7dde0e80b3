"""Per-round text attachments of a pathology episode (MedFlow-Bench App. H.2).

``direct_state_summary`` reports the viewer's own state (what QuPath would report); ``gui_state_summary`` is the
rule-based GUI/control summary derived from that state only (zoom and pan limits, blank area, overlay
positions, budget). Neither looks at pixels, so neither is pathology evidence.
"""

from __future__ import annotations

_EPSILON = 1e-6
_MAGNIFICATION_SOURCES = {"objective-power": "objective power metadata", "mpp": "pixel size"}


def _number(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}".replace(",", " ")


def _image_line(image: dict) -> str:
    parts = [f"{image['width']} x {image['height']} px at full resolution", f"{len(image['levels'])} pyramid levels"]
    if image.get("mpp"):
        parts.append(f"{image['mpp']:.4g} µm/px")
    if image.get("base_magnification"):
        source = _MAGNIFICATION_SOURCES.get(image["magnification_source"], image["magnification_source"])
        parts.append(f"base magnification {image['base_magnification']:.4g}x (from {source})")
    else:
        parts.append("no magnification metadata")
    return f"Image: {image['name']} ({'; '.join(parts)})"


def _rounds_used(policy: dict | None) -> str | None:
    if not policy:
        return None
    limit = policy.get("max_rounds")
    used = policy.get("rounds_used", 0)
    return f"{used} of {limit}" if limit is not None else str(used)


def direct_state_summary(state: dict) -> str:
    """Structured software/viewer state, one fact per line, from ``PathologyContext.state()``."""
    viewer = state["viewer"]
    lines = []
    if viewer["image"] is None:
        lines.append("No image is open in the viewer.")
    else:
        image, view = viewer["image"], viewer["view"]
        x0, y0, x1, y1 = view["field"]
        magnification = "magnification unknown"
        if view["magnification"] is not None:
            magnification = f"magnification {view['magnification']:.3g}x"
        lines += [
            _image_line(image),
            f"Image type: {viewer['image_type']}",
            f"Viewer centre (full-resolution px): x={_number(view['centre_x'])}, y={_number(view['centre_y'])}",
            f"Downsample: {view['downsample']:.4g} ({magnification}; pyramid level {view['pyramid_level']} shown)",
            f"Visible field (full-resolution px): x {_number(max(x0, 0), 0)}..{_number(min(x1, image['width']), 0)}, "
            f"y {_number(max(y0, 0), 0)}..{_number(min(y1, image['height']), 0)}",
            f"Viewport: {view['viewport_width']} x {view['viewport_height']} screen px",
        ]
    evidence = state.get("evidence", {})
    captures, recorded = evidence.get("captures", 0), evidence.get("recorded_views", 0)
    lines.append(f"Evidence so far: {captures} captured views, {recorded} recorded views")
    rounds = _rounds_used(state.get("policy"))
    if rounds:
        lines.append(f"Tool rounds used: {rounds}")
    return "\n".join(lines)


def _zoom_line(view: dict) -> str:
    downsample = view["downsample"]
    if downsample >= view["max_downsample"] - _EPSILON:
        return "Zoom: fully zoomed out (the whole slide fits the viewer); zoom in to see detail."
    if downsample <= view["min_downsample"] + _EPSILON:
        return "Zoom: at the zoom-in limit; zoom out for context."
    room_in = downsample / view["min_downsample"]
    room_out = view["max_downsample"] / downsample
    return f"Zoom: can zoom in by up to {room_in:.3g}x and out by up to {room_out:.3g}x."


def _pan_line(view: dict, image: dict) -> str:
    edges = []
    if view["centre_x"] <= _EPSILON:
        edges.append("left")
    if view["centre_x"] >= image["width"] - _EPSILON:
        edges.append("right")
    if view["centre_y"] <= _EPSILON:
        edges.append("top")
    if view["centre_y"] >= image["height"] - _EPSILON:
        edges.append("bottom")
    if not edges:
        return "Pan: the view centre is inside the slide; panning is possible in every direction."
    return f"Pan: the view centre is on the {' and '.join(edges)} slide edge; panning further that way is clamped."


def _coverage_line(view: dict, image: dict) -> str:
    x0, y0, x1, y1 = view["field"]
    field_area = (x1 - x0) * (y1 - y0)
    inside = max(0.0, min(x1, image["width"]) - max(x0, 0.0)) * max(0.0, min(y1, image["height"]) - max(y0, 0.0))
    blank = 1.0 - inside / field_area if field_area > 0 else 1.0
    width_share = min(1.0, (x1 - x0) / image["width"])
    height_share = min(1.0, (y1 - y0) / image["height"])
    return (
        f"Coverage: the field spans {width_share:.1%} of the slide width and {height_share:.1%} of its height; "
        f"{blank:.0%} of the screenshot lies outside the slide (blank background)."
    )


def gui_state_summary(state: dict) -> str:
    """Rule-based GUI/control state: what the controls allow next and where the non-tissue overlays are."""
    viewer = state["viewer"]
    lines = []
    if viewer["image"] is None:
        lines.append("Viewer: empty (no image open); load_case or load_image is needed before viewing.")
    else:
        image, view = viewer["image"], viewer["view"]
        lines += [
            f"Viewer: image open; screenshot {view['viewport_width']} x {view['viewport_height']} px; "
            "points are given as x, y in 0..999 from its top-left corner.",
            _zoom_line(view),
            _pan_line(view, image),
            _coverage_line(view, image),
        ]
        overlays = state.get("overlays") or {}
        if overlays:
            placed = "; ".join(
                f"{name.replace('_', ' ')} x {rect[0]}..{rect[2]}, y {rect[1]}..{rect[3]}"
                for name, rect in overlays.items()
            )
            lines.append(f"Overlays (not tissue; never pick points there): {placed}.")
    rounds = _rounds_used(state.get("policy"))
    if rounds:
        lines.append(f"Budget: {rounds} tool rounds used; at most one tool call per round.")
    return "\n".join(lines)

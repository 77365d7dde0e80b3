"""Whole-slide viewer geometry: the one specification of zoom, pan, clamping and point conversion.

The headless engine uses these functions directly; the Java bridge core (QuPathBridge ``ViewGeometry.java``)
implements the same rules and a conformance test drives both with the same calls, so an episode gives the
same viewer states on either. Conventions (QuPathViewer without rotation):

- the centre ``(cx, cy)`` is in full-resolution (level-0) pixels; ``downsample`` is level-0 px per screen px;
- screen point ``(sx, sy)`` of a ``vw x vh`` viewport shows image point ``c + (s - size / 2) * downsample``;
- normalised points are 0..999 from the top-left of the screenshot; value ``n`` is the centre of the
  ``n``-th thousandth: ``s = (n + 0.5) * size / 1000``;
- clamping: the centre stays on the slide (``0..width``, ``0..height``) and the downsample stays within
  ``MIN_DOWNSAMPLE`` (4 screen px per slide px) and the whole-slide fit (zooming out further shows nothing new);
- zoom units: ``magnification`` (absolute objective magnification: ``downsample = base / amount``),
  ``factor`` (relative, > 1, ``direction`` in|out) and ``steps`` (whole steps of ``ZOOM_STEP_FACTOR``);
  ``x, y`` first recentre the view on that screenshot point;
- pan units: ``viewport`` (fraction of the viewport side), ``screen_px`` and ``wsi_px`` (level-0 px); pan
  ``right`` moves the field of view right (the tissue moves left); ``x, y`` alone recentre on that point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..core.result import ActionError

MIN_DOWNSAMPLE = 0.25
ZOOM_STEP_FACTOR = math.sqrt(2.0)
MAX_ZOOM_FACTOR = 1024.0
MAX_ZOOM_STEPS = 40
NORMALISED_SPAN = 1000
ZOOM_UNITS = ("magnification", "factor", "steps")
ZOOM_DIRECTIONS = ("in", "out")
PAN_UNITS = ("viewport", "screen_px", "wsi_px")
PAN_DIRECTIONS = ("left", "right", "up", "down")
_PAN_VECTORS = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}


@dataclass(frozen=True)
class ViewState:
    """Everything that defines what the viewer shows; immutable so it doubles as a rollback checkpoint."""

    image_path: str | None = None
    image_type: str = "UNSET"
    width: int = 0
    height: int = 0
    centre_x: float = 0.0
    centre_y: float = 0.0
    downsample: float = 1.0
    viewport_width: int = 1024
    viewport_height: int = 768

    @property
    def has_image(self) -> bool:
        return self.image_path is not None

    @property
    def max_downsample(self) -> float:
        fit = max(self.width / self.viewport_width, self.height / self.viewport_height)
        return max(fit, MIN_DOWNSAMPLE)

    def clamped(self) -> ViewState:
        return replace(
            self,
            centre_x=min(max(self.centre_x, 0.0), float(self.width)),
            centre_y=min(max(self.centre_y, 0.0), float(self.height)),
            downsample=min(max(self.downsample, MIN_DOWNSAMPLE), self.max_downsample),
        )

    def screen_to_wsi(self, sx: float, sy: float) -> tuple[float, float]:
        return (
            self.centre_x + (sx - self.viewport_width / 2.0) * self.downsample,
            self.centre_y + (sy - self.viewport_height / 2.0) * self.downsample,
        )

    def normalised_to_screen(self, x: float, y: float) -> tuple[float, float]:
        return (
            (x + 0.5) * self.viewport_width / NORMALISED_SPAN,
            (y + 0.5) * self.viewport_height / NORMALISED_SPAN,
        )

    def normalised_to_wsi(self, x: float, y: float) -> tuple[float, float]:
        return self.screen_to_wsi(*self.normalised_to_screen(x, y))

    def wsi_to_normalised(self, x: float, y: float) -> tuple[float, float]:
        """Inverse of :meth:`normalised_to_wsi` (unclipped): where a slide point appears on the screenshot."""
        sx = (x - self.centre_x) / self.downsample + self.viewport_width / 2.0
        sy = (y - self.centre_y) / self.downsample + self.viewport_height / 2.0
        return sx * NORMALISED_SPAN / self.viewport_width - 0.5, sy * NORMALISED_SPAN / self.viewport_height - 0.5

    def field(self) -> tuple[float, float, float, float]:
        """Level-0 rectangle (x0, y0, x1, y1) shown by the viewport, possibly extending beyond the slide."""
        x0, y0 = self.screen_to_wsi(0.0, 0.0)
        x1, y1 = self.screen_to_wsi(float(self.viewport_width), float(self.viewport_height))
        return x0, y0, x1, y1

    def contains(self, x: float, y: float) -> bool:
        return 0.0 <= x < self.width and 0.0 <= y < self.height


def full_view(image_path: str, width: int, height: int, viewport: tuple[int, int], image_type: str) -> ViewState:
    """The view after opening an image: the whole slide, centred, as QuPath shows a newly opened image."""
    state = ViewState(
        image_path=image_path,
        image_type=image_type,
        width=width,
        height=height,
        centre_x=width / 2.0,
        centre_y=height / 2.0,
        viewport_width=viewport[0],
        viewport_height=viewport[1],
    )
    return replace(state, downsample=state.max_downsample)


def check_normalised_point(x: float | None, y: float | None) -> tuple[float, float] | None:
    """Both or neither of x, y; each a finite number in 0..999."""
    if x is None and y is None:
        return None
    if x is None or y is None:
        raise ActionError("invalid_argument", "give both x and y (0..999 on the current screenshot) or neither")
    for name, value in (("x", x), ("y", y)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ActionError("invalid_argument", f"{name} must be a number in 0..999")
        if not 0 <= value <= NORMALISED_SPAN - 1:
            raise ActionError("invalid_argument", f"{name}={value} is outside 0..999")
    return float(x), float(y)


def _positive(name: str, value: float | None) -> float:
    if value is None:
        raise ActionError("invalid_argument", f"{name} is required")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ActionError("invalid_argument", f"{name} must be a positive number, got {value!r}")
    return float(value)


def _recentred(state: ViewState, point: tuple[float, float] | None) -> ViewState:
    if point is None:
        return state
    cx, cy = state.normalised_to_wsi(*point)
    return replace(state, centre_x=cx, centre_y=cy)


def zoom(
    state: ViewState,
    direction: str | None,
    amount: float | None,
    unit: str,
    x: float | None,
    y: float | None,
    base_magnification: float | None,
) -> ViewState:
    """The clamped view after a zoom request; raises ActionError for an invalid request (state untouched)."""
    if unit not in ZOOM_UNITS:
        raise ActionError("invalid_argument", f"unit must be one of {', '.join(ZOOM_UNITS)}, got {unit!r}")
    amount = _positive("amount", amount)
    point = check_normalised_point(x, y)
    if unit == "magnification":
        if direction is not None and direction not in ZOOM_DIRECTIONS:
            raise ActionError("invalid_argument", f"direction must be 'in' or 'out', got {direction!r}")
        if not base_magnification:
            raise ActionError(
                "magnification_unknown",
                "this slide has no magnification or pixel-size metadata; zoom with unit 'factor' or 'steps'",
            )
        target = base_magnification / amount
    else:
        if direction not in ZOOM_DIRECTIONS:
            raise ActionError("invalid_argument", f"direction must be 'in' or 'out' for unit {unit!r}")
        if unit == "factor":
            if not 1.0 < amount <= MAX_ZOOM_FACTOR:
                raise ActionError(
                    "invalid_argument",
                    f"factor must be > 1 and <= {MAX_ZOOM_FACTOR:g} (direction chooses in or out), got {amount:g}",
                )
            factor = amount
        else:
            if amount != int(amount) or amount > MAX_ZOOM_STEPS:
                raise ActionError("invalid_argument", f"steps must be a whole number 1..{MAX_ZOOM_STEPS}")
            factor = ZOOM_STEP_FACTOR ** int(amount)
        target = state.downsample / factor if direction == "in" else state.downsample * factor
    return replace(_recentred(state, point), downsample=target).clamped()


def pan(
    state: ViewState,
    direction: str | None,
    amount: float | None,
    unit: str,
    x: float | None,
    y: float | None,
) -> ViewState:
    """The clamped view after a pan (direction + amount) or a recentre on a screenshot point (x, y)."""
    point = check_normalised_point(x, y)
    if point is not None:
        if direction is not None or amount is not None:
            raise ActionError("invalid_argument", "pan either by direction and amount, or recentre on x, y: not both")
        return _recentred(state, point).clamped()
    if direction not in PAN_DIRECTIONS:
        raise ActionError(
            "invalid_argument", f"direction must be one of {', '.join(PAN_DIRECTIONS)} (or give x and y to recentre)"
        )
    if unit not in PAN_UNITS:
        raise ActionError("invalid_argument", f"unit must be one of {', '.join(PAN_UNITS)}, got {unit!r}")
    amount = _positive("amount", amount)
    dx, dy = _PAN_VECTORS[direction]
    if unit == "viewport":
        step_x = amount * state.viewport_width * state.downsample
        step_y = amount * state.viewport_height * state.downsample
    elif unit == "screen_px":
        step_x = step_y = amount * state.downsample
    else:
        step_x = step_y = amount
    return replace(state, centre_x=state.centre_x + dx * step_x, centre_y=state.centre_y + dy * step_y).clamped()

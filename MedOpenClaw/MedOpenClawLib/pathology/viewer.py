"""The pathology viewer interface episodes drive, and the headless whole-slide engine that implements it.

:class:`PathologyViewer` is implemented twice: :class:`HeadlessWsiViewer` (OpenSlide/tiffslide, renders its own
screenshots) and ``qupath_client.QuPathBridgeClient`` (QuPath through the Py4J bridge). The action layer only
talks to this interface, so a pathology episode runs unchanged on either.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Protocol, runtime_checkable

import numpy as np

from ..core.result import ActionError, RenderedImage
from . import geometry
from .geometry import ViewState
from .render import THUMBNAIL_SIZE, overlay_layout, render_view
from .slide import DEFAULT_CACHE_BYTES, Slide, SlideInfo

# QuPath's ImageData.ImageType names, so states read the same from either viewer.
IMAGE_TYPES = ("BRIGHTFIELD_H_E", "BRIGHTFIELD_H_DAB", "BRIGHTFIELD_OTHER", "FLUORESCENCE", "OTHER", "UNSET")
MAX_SLEEP_SECONDS = 10.0
DEFAULT_VIEWPORT = (1024, 768)


@runtime_checkable
class PathologyViewer(Protocol):
    """Whole-slide viewer operations of MedFlow-Bench's QuPath registry (App. B); invalid calls raise ActionError
    and leave the viewer unchanged."""

    def view_state(self) -> ViewState: ...

    def slide_info(self) -> SlideInfo | None: ...

    def overlays(self) -> dict[str, tuple[int, int, int, int]]:
        """Screen rectangles of screenshot overlays that are not tissue (overview, scale bar, text)."""
        ...

    def load_image(self, path: str) -> ViewState: ...

    def set_image_type(self, image_type: str) -> ViewState: ...

    def zoom(
        self, direction: str | None, amount: float | None, unit: str, x: float | None, y: float | None
    ) -> ViewState: ...

    def pan(
        self, direction: str | None, amount: float | None, unit: str, x: float | None, y: float | None
    ) -> ViewState: ...

    def focus_qupath(self) -> ViewState: ...

    def capture(self, label: str) -> RenderedImage: ...

    def viewer_point_to_wsi_coordinate(self, x: float, y: float) -> tuple[float, float]: ...

    def record_view(self, label: str) -> dict: ...

    def sleep(self, seconds: float) -> None: ...

    def close(self) -> None: ...

    def restore(self, state: ViewState) -> None:
        """Return to a state taken earlier by :meth:`view_state` (the registry's rollback)."""
        ...


def check_image_type(image_type: str) -> str:
    if image_type not in IMAGE_TYPES:
        raise ActionError("invalid_argument", f"image_type must be one of {', '.join(IMAGE_TYPES)}, got {image_type!r}")
    return image_type


def check_sleep(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds <= MAX_SLEEP_SECONDS:
        raise ActionError("invalid_argument", f"seconds must be a number in 0..{MAX_SLEEP_SECONDS:g}")
    return float(seconds)


def view_record(state: ViewState, info: SlideInfo, label: str) -> dict:
    """What ``record_view_as_evidence`` keeps: the image and the level-0 field shown, clipped to the slide."""
    x0, y0, x1, y1 = state.field()
    return {
        "label": label,
        "image": info.name,
        "centre_x": round(state.centre_x, 3),
        "centre_y": round(state.centre_y, 3),
        "downsample": round(state.downsample, 6),
        "magnification": magnification(state, info),
        "field": [round(max(x0, 0.0), 3), round(max(y0, 0.0), 3),
                  round(min(x1, state.width), 3), round(min(y1, state.height), 3)],
    }


def magnification(state: ViewState, info: SlideInfo | None) -> float | None:
    if info is None or not info.base_magnification:
        return None
    return round(info.base_magnification / state.downsample, 4)


def describe_view(state: ViewState, info: SlideInfo | None) -> dict:
    """The viewer's published state: the same keys whichever viewer implements the interface."""
    if not state.has_image or info is None:
        return {"image": None, "image_type": state.image_type, "view": None}
    x0, y0, x1, y1 = state.field()
    return {
        "image": info.to_json(),
        "image_type": state.image_type,
        "view": {
            "centre_x": round(state.centre_x, 3),
            "centre_y": round(state.centre_y, 3),
            "downsample": round(state.downsample, 6),
            "magnification": magnification(state, info),
            "pyramid_level": info.best_level(state.downsample),
            "viewport_width": state.viewport_width,
            "viewport_height": state.viewport_height,
            "field": [round(x0, 3), round(y0, 3), round(x1, 3), round(y1, 3)],
            "min_downsample": geometry.MIN_DOWNSAMPLE,
            "max_downsample": round(state.max_downsample, 6),
        },
    }


class HeadlessWsiViewer:
    """A QuPath-like viewer without a GUI: view state over an opened slide, rendered on demand."""

    def __init__(self, viewport: tuple[int, int] = DEFAULT_VIEWPORT, cache_bytes: int = DEFAULT_CACHE_BYTES):
        if viewport[0] < 64 or viewport[1] < 64:
            raise ValueError("the viewport must be at least 64 x 64 screen pixels")
        self._viewport = (int(viewport[0]), int(viewport[1]))
        self._cache_bytes = cache_bytes
        self._slide: Slide | None = None
        self._thumbnail: np.ndarray | None = None
        self._state = ViewState(viewport_width=self._viewport[0], viewport_height=self._viewport[1])

    # -- state -----------------------------------------------------------------------------------------------
    def view_state(self) -> ViewState:
        return self._state

    def slide_info(self) -> SlideInfo | None:
        return None if self._slide is None else self._slide.info

    def overlays(self) -> dict[str, tuple[int, int, int, int]]:
        return overlay_layout(self._state)

    @property
    def slide(self) -> Slide | None:
        return self._slide

    def _require_image(self) -> ViewState:
        if not self._state.has_image:
            raise ActionError("no_image", "no image is open; call load_case or load_image first")
        return self._state

    # -- operations ------------------------------------------------------------------------------------------
    def load_image(self, path: str) -> ViewState:
        slide = Slide(path, self._cache_bytes)  # opens (or fails) before anything is replaced
        thumbnail = slide.thumbnail(THUMBNAIL_SIZE)
        self._swap_slide(slide, thumbnail)
        self._state = geometry.full_view(
            slide.info.path, slide.info.width, slide.info.height, self._viewport, "UNSET"
        )
        return self._state

    def set_image_type(self, image_type: str) -> ViewState:
        state = self._require_image()
        self._state = replace(state, image_type=check_image_type(image_type))
        return self._state

    def zoom(self, direction, amount, unit, x, y) -> ViewState:
        state = self._require_image()
        self._state = geometry.zoom(state, direction, amount, unit, x, y, self._slide.info.base_magnification)
        return self._state

    def pan(self, direction, amount, unit, x, y) -> ViewState:
        self._state = geometry.pan(self._require_image(), direction, amount, unit, x, y)
        return self._state

    def focus_qupath(self) -> ViewState:
        return self._state  # no window to raise: the headless view is always "in front"

    def capture(self, label: str) -> RenderedImage:
        state = self._require_image()
        return render_view(self._slide, state, self._thumbnail)  # the label names evidence, not the file

    def viewer_point_to_wsi_coordinate(self, x: float, y: float) -> tuple[float, float]:
        state = self._require_image()
        point = geometry.check_normalised_point(x, y)
        if point is None:
            raise ActionError("invalid_argument", "x and y are required")
        return state.normalised_to_wsi(*point)

    def record_view(self, label: str) -> dict:
        return view_record(self._require_image(), self._slide.info, label)

    def sleep(self, seconds: float) -> None:
        time.sleep(check_sleep(seconds))

    def close(self) -> None:
        self._swap_slide(None, None)
        self._state = ViewState(viewport_width=self._viewport[0], viewport_height=self._viewport[1])

    def restore(self, state: ViewState) -> None:
        if state.image_path != self._state.image_path:
            if state.image_path is None:
                self.close()
            else:
                self.load_image(state.image_path)
        self._state = state

    def _swap_slide(self, slide: Slide | None, thumbnail: np.ndarray | None) -> None:
        if self._slide is not None:
            self._slide.close()
        self._slide, self._thumbnail = slide, thumbnail

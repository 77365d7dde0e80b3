"""A non-privileged baseline: only the tools and the pixels they return, deterministic, no model.

Radiology: sweep a series as one cine contact sheet, take the largest abnormally bright 3D blob (FLAIR for
brain tumours, contrast-enhanced T1 for RANO, PET for lung), localise it with ``image_coords_to_ras`` and
``jump``, and answer from simple imaging rules. Pathology: the densest (darkest) tissue on the H&E overview,
zoomed in and converted with ``viewer_point_to_wsi_coordinate``. The rules are textbook-level on purpose: the
agent is a floor that uses evidence properly, not a solver.
"""

from __future__ import annotations

from .base import AgentContext, Plan, ScriptedAgent, last_tool_images, latest_user_message
from .pixels import (
    Blob,
    darkest_spot,
    decode,
    overlay_boxes,
    split_montage,
)

SWEEP_SLICES = 48
VIEW_CENTRE_1000 = (499.5, 499.5)  # after ``jump`` the target point is at the centre of each view
FIXED_WINDOW = {"window": 1200.0, "level": 600.0}  # one linear display for volumes that are compared
ENHANCING_CONTRAST = 12.0  # display levels above normal tissue: the lesion enhances
STRONG_ENHANCEMENT = 40.0
MEASURABLE_MM = 10.0  # RANO: measurable enhancing lesion, both diameters >= 10 mm
DENSITY_LADDER = (8.0, 16.0, 24.0, 32.0, 40.0, 48.0)  # denser than the tissue median -> a more atypical class
TUMOUR_CONTRAST = 30.0
RATIONALE = "Heuristic baseline (tools and pixels only)."


class ToolFailed(Exception):
    """A tool the plan needs failed: answer without evidence."""


def data_of(result: dict, what: str) -> dict:
    if not result.get("ok"):
        raise ToolFailed(f"{what}: {result.get('error')}")
    return result["data"]


class HeuristicAgent(ScriptedAgent):
    name = "heuristic"

    # ---------------------------------------------------------------------------------------- radiology
    def sweep(self, volume: str, window: dict | None = None) -> Plan:
        """Select ``volume`` and return (stack of axial tiles, their S offsets, mm per pixel, volume summary)."""
        first = [("select_volume", {"volume_name": volume, "view": "axial", "size": 64}),
                 ("get_slice_offset_range", {"view": "axial"}),
                 ("get_viewer_state", {"include_fusion": False})]
        if window:
            first.append(("wl", {"volume_name": volume, "view": "axial", "size": 64, **window}))
        results = yield first
        extent = data_of(results[1], "get_slice_offset_range")
        state = data_of(results[2], "get_viewer_state")
        summary = next(v for v in state["volumes"] if v["name"] == volume)
        step = (extent["max_mm"] - extent["min_mm"]) / (SWEEP_SLICES + 1)
        results = yield [("set_slice_offset", {"view": "axial", "offset": extent["min_mm"], "size": 64}),
                         ("scroll", {"view": "axial", "direction": "up", "num_slices": SWEEP_SLICES, "step": step,
                                     "output": "cine", "size": 256})]
        offsets = data_of(results[1], "scroll")["offsets_mm"]
        (sheet,) = last_tool_images(self.conversation)[1]
        stack = split_montage(decode(sheet), len(offsets))
        (r0, r1), (a0, a1) = summary["ras_bounds"][0], summary["ras_bounds"][1]
        mm_per_px = max(abs(r1 - r0), abs(a1 - a0)) / 256.0  # the fitted view spans the larger in-plane extent
        return stack, offsets, mm_per_px, summary

    def localize(self, swept: str, blob: Blob, offsets: list[float], evidence: str | None = None) -> Plan:
        """Evidence through the tools: the blob's screen point on the swept series to RAS, then the views
        centred there on the evidence series (the blob then sits at the centre of every view)."""
        evidence = evidence or swept
        results = yield [("set_slice_offset", {"view": "axial", "offset": offsets[blob.tile], "size": 64}),
                         ("image_coords_to_ras", {"view": "axial", "point_1000": [blob.x_1000, blob.y_1000],
                                                  "volume_name": swept})]
        ras = data_of(results[1], "image_coords_to_ras")["ras"]
        calls = [("jump", {"ras": ras, "size": 256})]  # every view: the key slices it cites are then shown
        if evidence != swept:
            calls.insert(0, ("select_volume", {"volume_name": evidence, "view": "axial", "size": 64}))
        results = yield calls
        return data_of(results[-1], "jump")["offsets_mm"], ras

    def series(self, context: AgentContext, role: str) -> str | None:
        return next((v.name for v in context.case.volumes if v.role == role), None)

    # ---------------------------------------------------------------------------------------- pathology
    def densest_focus(self) -> Plan:
        """Zoom into the densest tissue of the overview and read its level-0 coordinate back: (points, density
        contrast, spot area in level-0 px, the focus_qupath result)."""
        focused = (yield [("focus_qupath", {})])[0]
        spot = self._screen_spot()
        points, zoomed_spot = [], None
        if focused.get("ok") and spot is not None and spot.contrast >= DENSITY_LADDER[0]:
            view = focused["data"]["state"]["view"]
            zoomed = (yield [("zoom", {"direction": "in", "amount": 4.0, "unit": "factor",
                                       "x": spot.x_1000, "y": spot.y_1000})])[0]
            zoomed_spot = self._screen_spot()
            if zoomed.get("ok") and zoomed_spot is not None:
                yield [("capture_viewer", {"label": "densest region"})]
                converted = (yield [("viewer_point_to_wsi_coordinate",
                                     {"x": zoomed_spot.x_1000, "y": zoomed_spot.y_1000})])[0]
                if converted.get("ok") and converted["data"].get("inside_slide"):
                    points = [[converted["data"]["x"], converted["data"]["y"]]]
            area_px = (spot.area_fraction * view["viewport_width"] * view["viewport_height"]
                       * view["downsample"] ** 2)
        else:
            area_px = 0.0
        contrast = spot.contrast if spot is not None else 0.0
        return points, contrast, area_px, focused

    def _screen_spot(self):
        message = latest_user_message(self.conversation)
        if message is None or not message.images:
            return None
        return darkest_spot(decode(message.images[-1], "RGB"), overlay_boxes(message.text))



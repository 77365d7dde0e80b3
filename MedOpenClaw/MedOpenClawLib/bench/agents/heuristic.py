"""A non-privileged baseline: only the tools and the pixels they return, deterministic, no model.

Radiology: sweep a series as one cine contact sheet, take the largest abnormally bright 3D blob (FLAIR for
brain tumours, contrast-enhanced T1 for RANO, PET for lung), localise it with ``image_coords_to_ras`` and
``jump``, and answer from simple imaging rules. Pathology: the densest (darkest) tissue on the H&E overview,
zoomed in and converted with ``viewer_point_to_wsi_coordinate``. The rules are textbook-level on purpose: the
agent is a floor that uses evidence properly, not a solver.
"""

from __future__ import annotations

from ..labels import NSCLC_QUESTIONS
from .answers import bracs_answer, camelyon_answer, lumiere_answer, nsclc_answer, ucsf_answer
from .base import AgentContext, Plan, ScriptedAgent, last_tool_images, latest_user_message
from .pixels import (
    Blob,
    bright_blobs,
    bright_threshold,
    darkest_spot,
    decode,
    disk_contrast,
    overlay_boxes,
    split_montage,
)

SWEEP_SLICES = 48
VIEW_CENTRE_1000 = (499.5, 499.5)  # after ``jump`` the target point is at the centre of each view
FIXED_WINDOW = {"window": 1200.0, "level": 600.0}  # one linear display for volumes that are compared
ENHANCING_CONTRAST = 12.0  # display levels above normal tissue: the lesion enhances
STRONG_ENHANCEMENT = 40.0
MEASURABLE_MM = 10.0  # RANO: measurable enhancing lesion, both diameters >= 10 mm
DENSITY_LADDER = (8.0, 16.0, 24.0, 32.0, 40.0, 48.0)  # BRACS: denser than the tissue median -> more atypical
TUMOUR_CONTRAST = 30.0
RATIONALE = "Heuristic baseline (tools and pixels only)."


class ToolFailed(Exception):
    """A tool the plan needs failed: answer without evidence."""


def _data(result: dict, what: str) -> dict:
    if not result.get("ok"):
        raise ToolFailed(f"{what}: {result.get('error')}")
    return result["data"]


class HeuristicAgent(ScriptedAgent):
    name = "heuristic"

    # ---------------------------------------------------------------------------------------- radiology
    def _sweep(self, volume: str, window: dict | None = None) -> Plan:
        """Select ``volume`` and return (stack of axial tiles, their S offsets, mm per pixel, volume summary)."""
        first = [("select_volume", {"volume_name": volume, "view": "axial", "size": 64}),
                 ("get_slice_offset_range", {"view": "axial"}),
                 ("get_viewer_state", {"include_fusion": False})]
        if window:
            first.append(("wl", {"volume_name": volume, "view": "axial", "size": 64, **window}))
        results = yield first
        extent = _data(results[1], "get_slice_offset_range")
        state = _data(results[2], "get_viewer_state")
        summary = next(v for v in state["volumes"] if v["name"] == volume)
        step = (extent["max_mm"] - extent["min_mm"]) / (SWEEP_SLICES + 1)
        results = yield [("set_slice_offset", {"view": "axial", "offset": extent["min_mm"], "size": 64}),
                         ("scroll", {"view": "axial", "direction": "up", "num_slices": SWEEP_SLICES, "step": step,
                                     "output": "cine", "size": 256})]
        offsets = _data(results[1], "scroll")["offsets_mm"]
        (sheet,) = last_tool_images(self.conversation)[1]
        stack = split_montage(decode(sheet), len(offsets))
        (r0, r1), (a0, a1) = summary["ras_bounds"][0], summary["ras_bounds"][1]
        mm_per_px = max(abs(r1 - r0), abs(a1 - a0)) / 256.0  # the fitted view spans the larger in-plane extent
        return stack, offsets, mm_per_px, summary

    def _localize(self, swept: str, blob: Blob, offsets: list[float], evidence: str | None = None) -> Plan:
        """Evidence through the tools: the blob's screen point on the swept series to RAS, then the views
        centred there on the evidence series (the blob then sits at the centre of every view)."""
        evidence = evidence or swept
        results = yield [("set_slice_offset", {"view": "axial", "offset": offsets[blob.tile], "size": 64}),
                         ("image_coords_to_ras", {"view": "axial", "point_1000": [blob.x_1000, blob.y_1000],
                                                  "volume_name": swept})]
        ras = _data(results[1], "image_coords_to_ras")["ras"]
        calls = [("jump", {"ras": ras, "size": 256})]  # every view: the key slices it cites are then shown
        if evidence != swept:
            calls.insert(0, ("select_volume", {"volume_name": evidence, "view": "axial", "size": 64}))
        results = yield calls
        return _data(results[-1], "jump")["offsets_mm"], ras

    def _series(self, context: AgentContext, role: str) -> str | None:
        return next((v.name for v in context.case.volumes if v.role == role), None)

    def ucsf_plan(self, context: AgentContext) -> Plan:
        flair, t1c = self._series(context, "FLAIR"), self._series(context, "T1c")
        try:
            stack, offsets, mm_per_px, _ = yield from self._sweep(flair)
            blobs = bright_blobs(stack)
            if not blobs:
                return ucsf_answer("C", None, None, RATIONALE + " No abnormal FLAIR signal.")
            blob = blobs[0]
            key_slices, ras = yield from self._localize(flair, blob, offsets)
            results = yield [("select_volume", {"volume_name": t1c, "view": "axial", "size": 64}),
                             ("jump", {"ras": ras, "view": "axial", "size": 256})]
            _data(results[1], "jump")
            (t1c_view,) = last_tool_images(self.conversation)[1]
        except ToolFailed as failure:
            return ucsf_answer("C", None, None, f"{RATIONALE} {failure}")
        enhancement = disk_contrast(decode(t1c_view), *VIEW_CENTRE_1000, (blob.area / 3.14) ** 0.5)
        if enhancement >= STRONG_ENHANCEMENT:
            letter, reason = "A", "FLAIR-bright mass with strong enhancement"
        elif enhancement >= ENHANCING_CONTRAST:
            letter, reason = "F", "FLAIR-bright mass with mild enhancement"
        else:
            letter, reason = "B", "FLAIR-bright non-enhancing mass"
        return ucsf_answer(letter, key_slices, ras, f"{RATIONALE} {reason} ({enhancement:.0f} levels).")

    def nsclc_plan(self, context: AgentContext) -> Plan:
        pet, ct = self._series(context, "pet"), context.case.brief.get("source_volume_name")
        no_tumour = {qid: options[-1][0] for qid, _, options in NSCLC_QUESTIONS}
        try:
            stack, offsets, mm_per_px, summary = yield from self._sweep(pet)
            blobs = bright_blobs(stack)
            if not blobs:
                return nsclc_answer(no_tumour, None, None, RATIONALE + " No PET-avid lesion.")
            blob = blobs[0]
            key_slices, ras = yield from self._localize(pet, blob, offsets, evidence=ct)
        except ToolFailed as failure:
            return nsclc_answer(no_tumour, None, None, f"{RATIONALE} {failure}")
        bounds = summary["ras_bounds"]
        letters = {
            "q1": lung_lobe(ras, bounds),
            "q2": t_stage(blob.diameter_mm(mm_per_px)),
            "q3": n_stage(blobs[1:], blob),
            "q4": "A",  # adenocarcinoma: the most frequent NSCLC histology (a prior, not an image finding)
            "q5": "B",  # G2: the most frequent grade (a prior)
        }
        return nsclc_answer(letters, key_slices, ras, f"{RATIONALE} PET maximum localised on CT.")

    def lumiere_plan(self, context: AgentContext) -> Plan:
        names = {(v.role, v.name.split("_", 1)[-1]): v.name for v in context.case.volumes}
        try:
            old_ct1, old_offsets, mm_per_px, _ = yield from self._sweep(names[("OLD", "CT1")], FIXED_WINDOW)
            new_ct1, _, _, _ = yield from self._sweep(names[("CURRENT", "CT1")], FIXED_WINDOW)
            old_flair, _, _, _ = yield from self._sweep(names[("OLD", "FLAIR")], FIXED_WINDOW)
            new_flair, _, _, _ = yield from self._sweep(names[("CURRENT", "FLAIR")], FIXED_WINDOW)
        except (ToolFailed, KeyError) as failure:
            return lumiere_answer("B", {}, f"{RATIONALE} {failure}")
        threshold = bright_threshold(old_ct1)
        old, new = bright_blobs(old_ct1, threshold), bright_blobs(new_ct1, threshold)
        flair_threshold = bright_threshold(old_flair)
        old_edema = sum(blob.voxels for blob in bright_blobs(old_flair, flair_threshold))
        new_edema = sum(blob.voxels for blob in bright_blobs(new_flair, flair_threshold))
        letter, fields = rano(old, new, old_edema, new_edema, mm_per_px)
        return lumiere_answer(letter, fields, RATIONALE + " Enhancing and FLAIR volumes compared on fixed windows.")

    # ---------------------------------------------------------------------------------------- pathology
    def _densest_focus(self) -> Plan:
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

    def bracs_plan(self, context: AgentContext) -> Plan:
        points, contrast, _, _ = yield from self._densest_focus()
        label = density_label(contrast)
        return bracs_answer(label, [] if label == "N" else points, f"{RATIONALE} density {contrast:.0f}.")

    def camelyon_plan(self, context: AgentContext) -> Plan:
        points, contrast, area_px, focused = yield from self._densest_focus()
        if contrast < TUMOUR_CONTRAST or not points:
            return camelyon_answer("no_tumor", "negative", [], f"{RATIONALE} no dense focus ({contrast:.0f}).")
        mpp = (focused["data"]["state"].get("image") or {}).get("mpp") or 1.0
        return camelyon_answer("tumor_present", metastasis_size((area_px / 3.14) ** 0.5 * 2 * mpp), points,
                               f"{RATIONALE} dense focus ({contrast:.0f}).")

    def _screen_spot(self):
        message = latest_user_message(self.conversation)
        if message is None or not message.images:
            return None
        return darkest_spot(decode(message.images[-1], "RGB"), overlay_boxes(message.text))


# ------------------------------------------------------------------------------------------------ rules
def lung_lobe(ras: list[float], bounds: list[list[float]]) -> str:
    """Lobe from the lesion's position in the thorax: side by R, upper/middle/lower by height and depth."""
    (r0, r1), (a0, a1), (s0, s1) = bounds
    height = (ras[2] - s0) / max(s1 - s0, 1e-6)
    depth = (ras[1] - a0) / max(a1 - a0, 1e-6)
    right = ras[0] > (r0 + r1) / 2
    if height > 0.6:
        return "A" if right else "D"
    if height > 0.4 and depth > 0.55:
        return "B" if right else "F"
    return "C" if right else "E"


def t_stage(diameter_mm: float) -> str:
    """AJCC 8th edition T category by greatest diameter (<= 3, <= 5, <= 7, > 7 cm)."""
    for limit, letter in ((30.0, "A"), (50.0, "B"), (70.0, "C")):
        if diameter_mm <= limit:
            return letter
    return "D"


def n_stage(others: list[Blob], primary: Blob) -> str:
    """N0 without other avid foci; N2 when one lies near the midline (mediastinum), else N1 (hilar)."""
    if not others:
        return "A"
    return "C" if any(abs(blob.x_px - 128.0) < 20.0 for blob in others) else "B"


def rano(old: list[Blob], new: list[Blob], old_edema: int, new_edema: int,
         mm_per_px: float) -> tuple[str, dict[str, bool]]:
    """RANO-like response from enhancing-blob volumes (volume ratio 1.4 ~ SPD +25 %, 0.35 ~ SPD -50 %)."""
    old_volume, new_volume = sum(b.voxels for b in old), sum(b.voxels for b in new)
    measurable = [b for b in new if b.diameter_mm(mm_per_px) >= MEASURABLE_MM]
    small = [b for b in new if b.diameter_mm(mm_per_px) < MEASURABLE_MM]
    appeared = len(new) > len(old)
    t2 = old_edema > 0 and new_edema >= 1.25 * old_edema
    if appeared or t2 or (old_volume and new_volume >= 1.4 * old_volume):
        letter = "A"
    elif not new:
        letter = "D"
    elif old_volume and new_volume <= 0.35 * old_volume:
        letter = "C"
    else:
        letter = "B"
    fields = {
        "non_measurable_lesion": bool(small),
        "t2_progression": t2,
        "current_target_lesion": bool(measurable),
        "new_target_lesion": appeared and bool(measurable),
        "current_non_target_lesion": bool(small),
        "new_non_target_lesion": appeared and bool(small),
    }
    return letter, fields


def density_label(contrast: float) -> str:
    """BRACS label by how much denser than the surrounding tissue the densest region is."""
    labels = ("N", "PB", "UDH", "FEA", "ADH", "DCIS", "IC")
    return labels[sum(contrast >= step for step in DENSITY_LADDER)]


def metastasis_size(diameter_um: float) -> str:
    """CAMELYON size classes: ITC < 0.2 mm, micrometastasis 0.2-2 mm, macrometastasis > 2 mm."""
    return "itc" if diameter_um < 200 else "micro" if diameter_um <= 2000 else "macro"

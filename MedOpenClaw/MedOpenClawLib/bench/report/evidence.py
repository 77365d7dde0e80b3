"""The final evidence of an episode drawn over the anatomy, through the viewer engine the agent used.

Radiology: the case is opened in a fresh headless session through the registry's own ``open_case`` (the action
the episode's preload called), and each view is put back where the agent last saw it: the geometry record of the
last image returned for that view (plane, field of view), else the viewer-state snapshot of the trace, with the
background, fusion and window/level of that snapshot. The slice then moves to the answered key slice and the view
is rendered by the same ``render_view`` (corner overlay included). Over it, mapped only through that image's own
geometry record: the hidden lesion mask's contour on that slice, the other two answered key slices as lines, and
the answered RAS point (a cross on its slice, a ring with its distance otherwise). So the drawing is in the
viewer's own (radiological) orientation, whatever the storage order of the mask.

Pathology: the smallest pyramid level of the slide with the hidden regions and the answered coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...core.audit import action_states
from ...core.result import ActionError
from ...pathology.slide import Slide
from ..cases import Case, CaseFormatError, GroundTruth
from ..modules import get
from ..scoring.geometry import mask_from_file
from ..spec import LOC_NONE, LOC_WSI_POINT

VIEW_KEYS = {"axial": "key_slice_axial_mm", "sagittal": "key_slice_sagittal_mm", "coronal": "key_slice_coronal_mm"}
# Slicer's slice-view colours: Red = axial, Yellow = sagittal, Green = coronal
VIEW_COLOURS = {"axial": (240, 70, 55), "sagittal": (235, 205, 50), "coronal": (95, 185, 80)}
MASK_COLOUR = (0, 220, 255)
POINT_COLOUR = (255, 40, 255)
TRUTH_COLOUR = (60, 255, 60)  # the reference point, drawn when the answered evidence missed the lesion
EVIDENCE_SIZE = 384
INSET_SIZE = 320  # px of each zoomed pathology inset
INSET_MIN_FIELD_UM = 400.0  # an inset shows at least this much tissue around its region
NO_EVIDENCE = {"evidence": [], "reference_views": [], "pathology_overlay": None, "pathology_insets": [],
               "evidence_error": None}


@dataclass
class EvidenceView:
    view: str
    image: object  # PIL.Image
    offset_mm: float
    volume: str | None
    notes: list[str]
    geometry: object = None  # the SliceImageGeometry the image was rendered (and drawn) with
    mask_pixels: int | None = None  # pixels of the lesion mask on the drawn slice (None: no mask to draw)


def _font(size: int):
    """A scalable font at ``size`` px: the bitmap default is ~8 px, where 'A 14.0' reads as 'A140'."""
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


def label(draw, position: tuple[float, float], text: str, colour, size: int, anchor: str = "la") -> None:
    """Text that stays legible over any anatomy: a scalable font with a dark outline."""
    draw.text(position, text, fill=colour, font=_font(size), anchor=anchor, stroke_width=max(1, size // 7),
              stroke_fill=(0, 0, 0))


def edge_letters(xy_to_ras: np.ndarray) -> dict[str, str]:
    """The patient direction (R/L, A/P, S/I) at each image edge, from the image's own pixel-to-RAS matrix:
    the dominant RAS axis of the screen's right (+x) and up (+y) directions."""
    def letter(vector) -> str:
        axis = int(np.argmax(np.abs(vector)))
        return ("RAS" if vector[axis] > 0 else "LPI")[axis]

    right, up = np.asarray(xy_to_ras)[:3, 0], np.asarray(xy_to_ras)[:3, 1]
    return {"right": letter(right), "left": letter(-right), "top": letter(up), "bottom": letter(-up)}


def draw_orientation(draw, xy_to_ras: np.ndarray, size: int) -> None:
    """Orientation markers at the middle of each edge, as a radiologist's viewer shows them."""
    letters, font_size, margin = edge_letters(xy_to_ras), max(12, size // 24), 4
    middle = size / 2.0
    for edge, position, anchor in (("top", (middle, margin), "mt"), ("bottom", (middle, size - margin), "mb"),
                                   ("left", (margin, middle), "lm"), ("right", (size - margin, middle), "rm")):
        label(draw, position, letters[edge], (255, 255, 255), font_size, anchor)

def last_viewer_state(records: list[dict]) -> dict | None:
    """The viewer state after the last action that recorded one: what the agent saw last."""
    for _, state in reversed(action_states(records)):
        if isinstance(state, dict) and state.get("views"):
            return state
    return None


def last_image_geometries(records: list[dict]) -> dict[str, dict]:
    """view -> the geometry record of the last image of that view returned in the episode."""
    geometries: dict[str, dict] = {}
    for record in records:
        if record.get("kind") != "action":
            continue
        result = record.get("result") if isinstance(record.get("result"), dict) else {}
        for image in result.get("images") or []:
            if isinstance(image, dict) and isinstance(image.get("geometry"), dict) and image.get("view") in VIEW_KEYS:
                geometries[image["view"]] = image["geometry"]
    return geometries


class RadiologyEvidence:
    """Keeps one case open in a headless session: consecutive episodes of the same case reuse it."""

    def __init__(self, size: int = EVIDENCE_SIZE):
        self.size = size
        self._registry = None
        self._case_key: tuple | None = None

    def close(self) -> None:
        if self._registry is not None:
            self._registry.context.engine.app.close()
        self._registry, self._case_key = None, None

    def _engine_for(self, case: Case):
        from ...apps.radiology import build_headless_slicer_registry  # slicer-core (vtk): only where evidence is drawn

        key = (str(case.cases_dir), case.case_id)
        if key != self._case_key:
            self.close()
            registry = build_headless_slicer_registry([str(case.data_root)])
            self._registry, self._case_key = registry, key
            for index, relative in enumerate(case.open_paths):  # one case: later paths add to the first
                opened = registry.call("open_case", {"dicom_dir": str(case.path(relative)), "size": 64,
                                                     "keep_loaded": index > 0}, actor="system")
                if not opened.ok:
                    self.close()
                    raise RuntimeError(f"open_case failed: {opened.error.get('code')}: {opened.error.get('message')}")
        return self._registry.context.engine

    def render(self, case: Case, truth: GroundTruth, parsed: dict,
               records: list[dict]) -> tuple[list[EvidenceView], list[EvidenceView]]:
        """The answered evidence in each view, and -- when it missed the lesion (a view with the mask shows none
        of it at the answered slice) -- the same views at the reference key slices with the reference point."""
        from ...viewer.geometry import VIEWS  # vtk: evidence drawing only

        engine = self._engine_for(case)
        evidence = parsed.get("evidence") or {}
        localization = truth.localization or {}
        source = localization.get("source_volume_name")
        mask = None
        if truth.mask_path is not None and truth.mask_path.is_file():
            mask = mask_from_file(truth.mask_path)
        state, geometries = last_viewer_state(records) or {}, last_image_geometries(records)
        answered = [self._render_view(engine, view, state, geometries.get(view), evidence, source, mask)
                    for view in VIEWS]
        reference = {VIEW_KEYS[view]: value for view, value in (localization.get("reference_key_slices") or {}).items()
                     if view in VIEW_KEYS}
        missed = mask is not None and any(view.mask_pixels == 0 for view in answered)
        if not missed or not reference:
            return answered, []
        reference["ras"] = localization.get("reference_ras")
        return answered, [self._render_view(engine, view, state, geometries.get(view), reference, source, mask,
                                            TRUTH_COLOUR) for view in VIEWS]

    def _volume(self, engine, names: list[str | None]):
        for name in names:
            if name:
                try:
                    return engine.find_volume(volume_name=name)
                except ActionError:
                    continue
        return engine.volume_nodes()[0]

    def _render_view(self, engine, view: str, state: dict, geometry: dict | None, evidence: dict,
                     source: str | None, mask, point_colour=POINT_COLOUR) -> EvidenceView:
        from PIL import Image, ImageDraw

        from ...viewer.rendering import render_view  # vtk, Pillow: evidence drawing only

        notes: list[str] = []
        view_state = (state.get("views") or {}).get(view) or {}
        background = self._volume(engine, [view_state.get("background"), source])
        if view_state.get("background") and background.GetName() != view_state["background"]:
            notes.append(f"{view_state['background']} is not in the case package; showing {background.GetName()}")
        self._show_layers(engine, view, view_state, background, state)
        self._restore_plane(engine, view, view_state, geometry)
        key = evidence.get(VIEW_KEYS[view])
        if isinstance(key, (int, float)):
            low, high, _ = engine.offset_range(view, background)
            if not low - 1e-6 <= key <= high + 1e-6:
                notes.append(f"answered key slice {key:.2f} mm lies outside the volume ({low:.2f}..{high:.2f})")
            engine.set_offset(view, float(key), clamp=True)
        else:
            notes.append("no key slice answered for this view: showing the last slice the agent saw")
        rendered = render_view(engine, view, self.size, returned=False)
        image = Image.fromarray(rendered.pixels).convert("RGB")
        drawn = rendered.geometry
        mask_pixels = None
        if mask is not None:
            image, mask_pixels = self._draw_mask(image, mask, drawn.xy_to_ras)
        draw = ImageDraw.Draw(image)
        self._draw_key_lines(draw, view, evidence, drawn.xy_to_ras)
        ras = evidence.get("ras")
        if isinstance(ras, (list, tuple)) and len(ras) == 3:
            notes += self._draw_point(draw, view, drawn, [float(value) for value in ras], background, point_colour)
        draw_orientation(draw, drawn.xy_to_ras, self.size)
        return EvidenceView(view, image, float(rendered.slice_offset_mm), background.GetName(), notes, drawn,
                            mask_pixels)

    def _show_layers(self, engine, view: str, view_state: dict, background, state: dict) -> None:
        """Background, fusion and window/level as in the viewer-state snapshot."""
        composite = engine.logic(view).GetSliceCompositeNode()
        composite.SetBackgroundVolumeID(background.GetID())
        foreground = self._volume(engine, [view_state["foreground"]]) if view_state.get("foreground") else None
        composite.SetForegroundVolumeID(foreground.GetID() if foreground is not None else None)
        composite.SetForegroundOpacity(float(view_state.get("foreground_opacity") or 0.0) if foreground else 0.0)
        for volume in state.get("volumes") or []:
            node = next((node for node in engine.volume_nodes() if node.GetName() == volume.get("name")), None)
            if node is not None and volume.get("window"):
                engine.set_window_level(node, volume.get("window"), volume.get("level"), bool(volume.get("auto")))

    def _restore_plane(self, engine, view: str, view_state: dict, geometry: dict | None) -> None:
        """The plane and field of view of the last image the agent saw (its geometry record), else those of
        the viewer-state snapshot, else the standard view fitted to the volume."""
        from ...viewer.geometry import numpy_to_vtk_matrix  # vtk: evidence drawing only

        logic = engine.logic(view)
        slice_node = logic.GetSliceNode()
        if geometry is not None:
            slice_node.GetSliceToRAS().DeepCopy(numpy_to_vtk_matrix(np.array(geometry["slice_to_ras"], dtype=float)))
            slice_node.SetFieldOfView(*[float(value) for value in geometry["field_of_view_mm"]])
            slice_node.UpdateMatrices()
            return
        slice_node.SetOrientation(view_state.get("orientation") or slice_node.GetDefaultOrientation())
        logic.FitSliceToAll()
        fov = view_state.get("field_of_view_mm")
        if isinstance(fov, list) and len(fov) == 2 and min(fov) > 0:
            slice_node.SetFieldOfView(float(fov[0]), float(fov[1]), slice_node.GetFieldOfView()[2])
        center = view_state.get("center_ras")
        if isinstance(center, list) and len(center) == 3:
            slice_node.JumpSliceByCentering(*[float(value) for value in center])
        if isinstance(view_state.get("offset_mm"), (int, float)):
            engine.set_offset(view, float(view_state["offset_mm"]), clamp=True)

    def _pixel_ras(self, xy_to_ras: np.ndarray) -> np.ndarray:
        """(size, size, 3) RAS of every pixel centre, rows from the top as in the rendered image."""
        rows, columns = np.mgrid[0 : self.size, 0 : self.size].astype(float)
        xy = np.stack([columns, self.size - 1.0 - rows, np.zeros_like(rows), np.ones_like(rows)], axis=-1)
        return (xy @ xy_to_ras.T)[..., :3]

    def _draw_mask(self, image, mask, xy_to_ras: np.ndarray):
        """The mask sampled at every pixel's RAS (nearest voxel, through the mask's own affine); its outline.
        Returns the drawn image and how many pixels of the slice the mask covers."""
        from PIL import Image
        from scipy import ndimage

        ras = self._pixel_ras(xy_to_ras).reshape(-1, 3)
        ijk = np.linalg.solve(mask.affine, np.column_stack([ras, np.ones(len(ras))]).T).T[:, :3]
        index = np.floor(ijk + 0.5).astype(int)
        inside = np.all((index >= 0) & (index < np.array(mask.data.shape)), axis=1)
        hit = np.zeros(len(index), dtype=bool)
        hit[inside] = mask.data[tuple(index[inside].T)]
        hit = hit.reshape(self.size, self.size)
        contour = hit & ~ndimage.binary_erosion(hit)
        contour = ndimage.binary_dilation(contour, iterations=max(1, self.size // 256))
        pixels = np.asarray(image).copy()
        pixels[contour] = MASK_COLOUR
        return Image.fromarray(pixels), int(hit.sum())

    def _draw_key_lines(self, draw, view: str, evidence: dict, xy_to_ras: np.ndarray) -> None:
        """Each other view's answered key slice is the line where its plane meets this view's plane."""
        from ...viewer.geometry import AXIS_LETTER, CANONICAL_AXIS  # vtk: evidence drawing only

        last = self.size - 1.0
        for other, key_name in VIEW_KEYS.items():
            value = evidence.get(key_name)
            if other == view or not isinstance(value, (int, float)):
                continue
            axis = CANONICAL_AXIS[other]
            a, b, c = xy_to_ras[axis, 0], xy_to_ras[axis, 1], xy_to_ras[axis, 3]
            if abs(a) < 1e-9 and abs(b) < 1e-9:
                continue  # parallel planes
            if abs(a) >= abs(b):
                ends = [((value - c - b * y) / a, y) for y in (0.0, last)]
            else:
                ends = [(x, (value - c - a * x) / b) for x in (0.0, last)]
            pixels = [(x, last - y) for x, y in ends]
            draw.line(pixels, fill=VIEW_COLOURS[other], width=max(1, self.size // 256))
            inside = [point for point in pixels if 0 <= point[0] <= last and 0 <= point[1] <= last]
            if inside:  # label the top end of a vertical line, the right end of a horizontal one
                x, y = min(inside, key=lambda point: point[1]) if abs(a) >= abs(b) else max(inside)
                size = max(11, self.size // 30)
                label(draw, (min(x + 4, last - 4.5 * size), min(max(y + 2.2 * size, 2.2 * size), last - 2.5 * size)),
                      f"{AXIS_LETTER[other]} {value:.1f}", VIEW_COLOURS[other], size)

    def _draw_point(self, draw, view: str, geometry, ras: list[float], background,
                    colour=POINT_COLOUR) -> list[str]:
        from ...viewer.geometry import CANONICAL_AXIS, spacing_along  # vtk: evidence drawing only

        column, row, distance = geometry.ras_to_pixel(ras)
        if not (0 <= column < self.size and 0 <= row < self.size):
            return [f"answered RAS point lies outside this {view} view"]
        half = spacing_along(background, CANONICAL_AXIS[view]) / 2.0
        radius = max(4, self.size // 48)
        if abs(distance) <= half + 1e-6:
            draw.line((column - radius, row, column + radius, row), fill=colour, width=2)
            draw.line((column, row - radius, column, row + radius), fill=colour, width=2)
            return []
        draw.ellipse((column - radius, row - radius, column + radius, row + radius), outline=colour, width=2)
        return [f"answered RAS point is {distance:+.1f} mm off this {view} slice (ring)"]


def episode_evidence(renderer: RadiologyEvidence, run, episode, records: list[dict], page: Path,
                     reference) -> dict:
    """Evidence images for one episode, as template variables; a failure is reported on the page.
    ``reference``: the episode's (case, ground truth), or why they are not available."""
    result = dict(NO_EVIDENCE, evidence=[], reference_views=[], pathology_insets=[])
    if isinstance(reference, str):
        result["evidence_error"] = reference
        return result
    case, truth = reference
    assets = page.with_suffix("")
    assets.mkdir(parents=True, exist_ok=True)
    try:
        if case is None:
            raise CaseFormatError(f"the case package has no case {episode.case_id!r}")
        rule = get(run.module).localization
        if rule == LOC_WSI_POINT:
            if case.slide:
                overlay, insets = pathology_views(truth, episode.parsed, case.path(case.slide), assets)
                result["pathology_overlay"] = overlay.relative_to(page.parent).as_posix() if overlay else None
                result["pathology_insets"] = [{**inset, "src": inset["src"].relative_to(page.parent).as_posix()}
                                              for inset in insets]
            return result
        if rule == LOC_NONE:
            return result  # yes/no evidence fields: nothing to draw on a slice
        answered, reference_views = renderer.render(case, truth, episode.parsed, records)
        for key, prefix, views in (("evidence", "evidence", answered), ("reference_views", "reference",
                                                                         reference_views)):
            for view in views:
                target = assets / f"{prefix}_{view.view}.png"
                view.image.save(target)
                result[key].append({"view": view.view, "src": target.relative_to(page.parent).as_posix(),
                                    "volume": view.volume, "offset": f"{view.offset_mm:.2f} mm", "notes": view.notes})
    except (ActionError, CaseFormatError, OSError, ValueError, RuntimeError, ImportError,
            TypeError, KeyError, AttributeError) as error:
        # ImportError: no viewer (slicer-core) here; Type/Key/AttributeError: a trace whose viewer-state or
        # geometry records have another shape. Either way the report still renders, without the evidence views.
        result["evidence_error"] = f"{type(error).__name__}: {error}"
    return result


def _draw_marks(draw, truth: GroundTruth, parsed: dict, scale: float, origin=(0.0, 0.0), dot: float = 3) -> None:
    """Hidden regions (green ROI/tumour and their holes, grey exclusions) and answered localizations (red dots),
    from level-0 pixels through ``scale`` and ``origin`` (level-0 pixel at the image's top-left)."""
    def at(x, y):
        return (x - origin[0]) * scale, (y - origin[1]) * scale

    for region in truth.regions:
        colour = (128, 128, 128) if region["kind"] == "exclusion" else (0, 160, 0)
        for ring in [region["polygon"], *region.get("holes", [])]:
            draw.polygon([at(x, y) for x, y in ring], outline=colour, width=max(1, int(dot // 2)))
    for point in parsed.get("localizations") or []:
        if isinstance(point, (list, tuple)) and len(point) == 2:
            x, y = at(*point)
            draw.ellipse((x - dot, y - dot, x + dot, y + dot), fill=(220, 0, 0))


def inset_boxes(truth: GroundTruth, mpp: float | None, limit: int = 3) -> list[tuple[float, float, float, str]]:
    """(centre x, centre y, side, label) in level-0 pixels of a square around each region to enlarge (exclusions
    left out): the region with a margin, and at least :data:`INSET_MIN_FIELD_UM` of tissue."""
    boxes = []
    minimum = INSET_MIN_FIELD_UM / mpp if mpp else 0.0
    for region in [region for region in truth.regions if region["kind"] != "exclusion"][:limit]:
        xs, ys = [x for x, _ in region["polygon"]], [y for _, y in region["polygon"]]
        side = max(max(xs) - min(xs), max(ys) - min(ys)) * 1.6
        boxes.append(((min(xs) + max(xs)) / 2.0, (min(ys) + max(ys)) / 2.0, max(side, minimum, 64.0),
                      str(region.get("label") or region["kind"])))
    return boxes


def pathology_views(truth: GroundTruth, parsed: dict, slide_path: Path, assets: Path) -> tuple[Path | None, list]:
    """The whole slide (smallest pyramid level) with the hidden regions and answered coordinates, a box around
    each region, and each box enlarged from the pyramid level that shows it at :data:`INSET_SIZE` px: on the
    ~250 px overview a small metastasis is a dot."""
    from PIL import Image, ImageDraw


    if not slide_path.is_file() or not truth.slide_size:
        return None, []
    slide = Slide(slide_path)
    try:
        level = len(slide.info.level_dimensions) - 1
        width, height = slide.info.level_dimensions[level]
        overview = Image.fromarray(slide.read_level(level, 0, 0, width, height)).convert("RGB")
        scale = overview.width / truth.slide_size[0]
        draw = ImageDraw.Draw(overview)
        _draw_marks(draw, truth, parsed, scale)
        insets = []
        for index, (x, y, side, name) in enumerate(inset_boxes(truth, slide.info.mpp)):
            draw.rectangle(((x - side / 2) * scale - 1, (y - side / 2) * scale - 1, (x + side / 2) * scale + 1,
                            (y + side / 2) * scale + 1), outline=(20, 90, 220), width=1)
            chosen = slide.info.best_level(side / INSET_SIZE)
            downsample = slide.info.level_downsamples[chosen]
            left, top, extent = x - side / 2, y - side / 2, max(1, int(round(side / downsample)))
            pixels = slide.read_level(chosen, int(left / downsample), int(top / downsample), extent, extent)
            inset = Image.fromarray(pixels).convert("RGB").resize((INSET_SIZE, INSET_SIZE), Image.Resampling.LANCZOS)
            _draw_marks(ImageDraw.Draw(inset), truth, parsed, INSET_SIZE / side, (left, top), dot=5)
            target = assets / f"evidence_inset_{index}.png"
            inset.save(target)
            field = f"{side * slide.info.mpp:.0f} µm" if slide.info.mpp else f"{side:.0f} px"
            insets.append({"src": target, "caption": f"region {index + 1} ({name}) · {field} field · "
                                                     f"pyramid level {chosen}"})
        target = assets / "evidence_slide.png"
        overview.save(target)
        return target, insets
    finally:
        slide.close()

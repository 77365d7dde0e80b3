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

from ...result import ActionError
from ..cases import PATHOLOGY_MODULES, Case, CaseFormatError, GroundTruth, load_cases, load_ground_truth

VIEW_KEYS = {"axial": "key_slice_axial_mm", "sagittal": "key_slice_sagittal_mm", "coronal": "key_slice_coronal_mm"}
# Slicer's slice-view colours: Red = axial, Yellow = sagittal, Green = coronal
VIEW_COLOURS = {"axial": (240, 70, 55), "sagittal": (235, 205, 50), "coronal": (95, 185, 80)}
MASK_COLOUR = (0, 220, 255)
POINT_COLOUR = (255, 40, 255)
EVIDENCE_SIZE = 384
NO_EVIDENCE = {"evidence": [], "pathology_overlay": None, "evidence_error": None}


@dataclass
class EvidenceView:
    view: str
    image: object  # PIL.Image
    offset_mm: float
    volume: str | None
    notes: list[str]
    geometry: object = None  # the SliceImageGeometry the image was rendered (and drawn) with


def last_viewer_state(records: list[dict]) -> dict | None:
    """The viewer state after the last action that recorded one: what the agent saw last."""
    for record in reversed(records):
        if record.get("kind") == "action" and isinstance(record.get("state"), dict) and record["state"].get("views"):
            return record["state"]
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
        from ...session import build_headless_slicer_registry

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

    def render(self, case: Case, truth: GroundTruth, parsed: dict, records: list[dict]) -> list[EvidenceView]:
        from ...viewer.geometry import VIEWS

        engine = self._engine_for(case)
        evidence = parsed.get("evidence") or {}
        source = (truth.localization or {}).get("source_volume_name")
        mask = None
        if truth.mask_path is not None and truth.mask_path.is_file():
            from ..scoring.geometry import mask_from_file

            mask = mask_from_file(truth.mask_path)
        state, geometries = last_viewer_state(records) or {}, last_image_geometries(records)
        return [self._render_view(engine, view, state, geometries.get(view), evidence, source, mask)
                for view in VIEWS]

    def _volume(self, engine, names: list[str | None]):
        from ...result import ActionError

        for name in names:
            if name:
                try:
                    return engine.find_volume(volume_name=name)
                except ActionError:
                    continue
        return engine.volume_nodes()[0]

    def _render_view(self, engine, view: str, state: dict, geometry: dict | None, evidence: dict,
                     source: str | None, mask) -> EvidenceView:
        from PIL import Image, ImageDraw

        from ...viewer.rendering import render_view

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
        if mask is not None:
            image = self._draw_mask(image, mask, drawn.xy_to_ras)
        draw = ImageDraw.Draw(image)
        self._draw_key_lines(draw, view, evidence, drawn.xy_to_ras)
        ras = evidence.get("ras")
        if isinstance(ras, (list, tuple)) and len(ras) == 3:
            notes += self._draw_point(draw, view, drawn, [float(value) for value in ras], background)
        return EvidenceView(view, image, float(rendered.slice_offset_mm), background.GetName(), notes, drawn)

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
        from ...viewer.geometry import numpy_to_vtk_matrix

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
        """The mask sampled at every pixel's RAS (nearest voxel, through the mask's own affine); its outline."""
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
        return Image.fromarray(pixels)

    def _draw_key_lines(self, draw, view: str, evidence: dict, xy_to_ras: np.ndarray) -> None:
        """Each other view's answered key slice is the line where its plane meets this view's plane."""
        from ...viewer.geometry import AXIS_LETTER, CANONICAL_AXIS

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
                draw.text((min(x + 3, last - 56), min(max(y + 18, 18), last - 30)),
                          f"{AXIS_LETTER[other]} {value:.1f}", fill=VIEW_COLOURS[other])

    def _draw_point(self, draw, view: str, geometry, ras: list[float], background) -> list[str]:
        from ...viewer.geometry import CANONICAL_AXIS, spacing_along

        column, row, distance = geometry.ras_to_pixel(ras)
        if not (0 <= column < self.size and 0 <= row < self.size):
            return [f"answered RAS point lies outside this {view} view"]
        half = spacing_along(background, CANONICAL_AXIS[view]) / 2.0
        radius = max(4, self.size // 48)
        if abs(distance) <= half + 1e-6:
            draw.line((column - radius, row, column + radius, row), fill=POINT_COLOUR, width=2)
            draw.line((column, row - radius, column, row + radius), fill=POINT_COLOUR, width=2)
            return []
        draw.ellipse((column - radius, row - radius, column + radius, row + radius), outline=POINT_COLOUR, width=2)
        return [f"answered RAS point is {distance:+.1f} mm off this {view} slice (ring)"]


def episode_evidence(renderer: RadiologyEvidence, run, episode, records: list[dict], page: Path) -> dict:
    """Evidence images for one episode, as template variables; a failure is reported on the page."""
    cases_dir = run.identity.get("cases_dir")
    result = dict(NO_EVIDENCE, evidence=[])
    if not cases_dir or not Path(cases_dir, "manifest.json").is_file():
        result["evidence_error"] = "the run's case package is not available on this machine"
        return result
    assets = page.with_suffix("")
    assets.mkdir(parents=True, exist_ok=True)
    try:
        truth = load_ground_truth(cases_dir, episode.case_id)
        case = next(case for case in load_cases(cases_dir) if case.case_id == episode.case_id)
        if run.module in PATHOLOGY_MODULES:
            target = assets / "evidence_slide.png"
            if case.slide and pathology_overlay(truth, episode.parsed, case.path(case.slide), target):
                result["pathology_overlay"] = target.relative_to(page.parent).as_posix()
            return result
        if run.module == "lumiere":
            return result  # LUMIERE's evidence is lesion-state fields, nothing to draw on a slice
        for view in renderer.render(case, truth, episode.parsed, records):
            target = assets / f"evidence_{view.view}.png"
            view.image.save(target)
            result["evidence"].append({"view": view.view, "src": target.relative_to(page.parent).as_posix(),
                                       "volume": view.volume, "offset": f"{view.offset_mm:.2f} mm",
                                       "notes": view.notes})
    except (ActionError, CaseFormatError, OSError, ValueError, StopIteration, RuntimeError, ImportError,
            TypeError, KeyError, AttributeError) as error:
        # ImportError: no viewer (slicer-core) here; Type/Key/AttributeError: a trace whose viewer-state or
        # geometry records have another shape. Either way the report still renders, without the evidence views.
        result["evidence_error"] = f"{type(error).__name__}: {error}"
    return result


def pathology_overlay(truth: GroundTruth, parsed: dict, slide: Path, out: Path) -> Path | None:
    """Smallest pyramid level of the slide with the hidden regions (green ROI/tumour, grey exclusions) and the
    answered localizations (red dots)."""
    import tifffile
    from PIL import Image, ImageDraw

    if not slide.is_file() or not truth.slide_size:
        return None
    with tifffile.TiffFile(slide) as tiff:
        level = tiff.pages[len(tiff.pages) - 1].asarray()
    image = Image.fromarray(level[..., :3]).convert("RGB")
    scale = image.width / truth.slide_size[0]
    draw = ImageDraw.Draw(image)
    for region in truth.regions:
        colour = (128, 128, 128) if region["kind"] == "exclusion" else (0, 160, 0)
        draw.polygon([(x * scale, y * scale) for x, y in region["polygon"]], outline=colour)
    for x, y in parsed.get("localizations") or []:
        draw.ellipse((x * scale - 3, y * scale - 3, x * scale + 3, y * scale + 3), fill=(220, 0, 0))
    image.save(out)
    return out

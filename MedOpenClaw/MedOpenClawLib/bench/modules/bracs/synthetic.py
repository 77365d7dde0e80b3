"""Synthetic whole-slide images in the BRACS and CAMELYON17 distribution layouts, rendered tile by tile.

Slides are pyramidal tiled JPEG TIFFs (OpenSlide/tiffslide readable) of a scene of labelled tissue polygons
(:mod:`.tissue`): BRACS breast tissue (stroma, fat, lobules, ducts, lymphocytic infiltrates) with one or more
annotated lesion RoIs whose architecture defines the class (usual vs atypical duct filling, cribriform spaces,
comedo necrosis, infiltrating nests); CAMELYON17 lymph nodes (capsule, sinuses, follicles with germinal
centres, medulla, perinodal fat, sinus histiocytes) with several metastases on positive slides. Every slide
spans the same physical area (:data:`SLIDE_WIDTH_UM`: 24.6 x 18.4 mm of glass at the sizes' 4:3 aspect), so the
µm/px follows the pixel size and the CAMELYON size categories stay physical (ITC < 0.2 mm, micro 0.2-2 mm, macro
> 2 mm by largest diameter). Tissue lies anywhere on the glass, in one to three pieces, and a lesion anywhere in
the tissue: as on real slides, a lesion is a small part of the tissue, so no fixed location finds it.

BRACS slides are Aperio-style ``.svs`` with one QuPath GeoJSON export per slide and the ``BRACS.xlsx`` sheet;
CAMELYON17 slides are generic pyramidal ``.tif`` with ASAP XML lesion annotations and ``stage_labels.csv``.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np

from ...synthetic.common import allocate, rng_for
from ...synthetic.pool import run_jobs
from ...synthetic.slide_layout import SlideLayout, circle, polygon_px, slide_mpp
from ...synthetic.tissue import (
    SlideScene,
    irregular_polygon,
    scaled,
    write_scene,
)
from .labels import BRACS_LABELS

BRACS_GROUPS = {"N": "BT", "PB": "BT", "UDH": "BT", "FEA": "AT", "ADH": "AT", "DCIS": "MT", "IC": "MT"}
# WSI labels of the 547 BRACS slides (Brancati et al. 2022): mostly benign and invasive.
BRACS_PRIORS = {"N": 44, "PB": 147, "UDH": 74, "FEA": 41, "ADH": 48, "DCIS": 61, "IC": 132}
# ------------------------------------------------------------------------------------------------ BRACS
def _lobule(layout: SlideLayout, center, radius) -> float:
    rng = layout.rng
    layout.add("loose_stroma", irregular_polygon(center, radius, radius * rng.uniform(0.7, 1.0), rng, 40, 0.12))
    count = int(rng.integers(25, 60))  # packed acini: a lobule is blue at low power
    placed = np.empty((count, 3))  # (x, y, radius) of the acini placed so far: the first `acini` rows
    acini = 0
    for _ in range(count):
        r = rng.uniform(16, 30)
        point = layout.clear_spot(center, radius * 0.8 - r, r, placed[:acini], 4, tries=20)
        if point is not None:
            placed[acini] = (*point, r)
            acini += 1
            layout.duct(point, r, rng.uniform(8, 11), "lumen" if rng.random() < 0.7 else "secretion")
    return radius


def _crowded_ducts(layout: SlideLayout, center, extent, count, radius_range, build) -> float:
    """``count`` ducts around ``center`` within ``extent`` µm, each drawn by ``build(point, radius)``; returns
    the lesion's reach (for its RoI)."""
    rng, placed, ducts, reach = layout.rng, np.empty((count, 3)), 0, 0.0  # (x, y, radius) of the first `ducts`
    for _ in range(count):
        r = rng.uniform(*radius_range)
        point = layout.clear_spot(center, extent, r, placed[:ducts], 15, tries=30)
        if point is not None:
            placed[ducts] = (*point, r)
            ducts += 1
            build(point, r)
            reach = max(reach, np.hypot(point[0] - center[0], point[1] - center[1]) + r)
    return reach


def _holes(layout: SlideLayout, center, radius, count, hole_range, kind="lumen", near_rim=False) -> None:
    rng = layout.rng
    for _ in range(count):
        r = rng.uniform(*hole_range)
        lo = 0.65 if near_rim else 0.0
        radial = rng.uniform(lo, 0.85) * (radius - r)
        angle = rng.uniform(0, 2 * np.pi)
        point = (center[0] + radial * np.cos(angle), center[1] + radial * np.sin(angle))
        if near_rim:  # slit-like secondary lumens of usual hyperplasia, along the duct wall
            layout.add(kind, irregular_polygon(point, r * 2.2, r * 0.6, rng, 16, 0.1, rotation=angle + np.pi / 2))
        else:  # punched-out, rigid round spaces (cribriform)
            layout.add(kind, circle(point, r, rng, 0.02, 16))


def _bracs_lesion(layout: SlideLayout, label: str, center) -> float:
    """Draw one lesion of class ``label`` around ``center``; returns its reach in µm."""
    rng = layout.rng
    if label == "N":
        return _lobule(layout, center, rng.uniform(300, 480)) * 1.05
    if label == "PB":
        variant = rng.choice(["cysts", "adenosis", "fibroadenoma"])
        if variant == "cysts":
            return _crowded_ducts(layout, center, 350, int(rng.integers(2, 5)), (120, 300),
                                  lambda p, r: layout.duct(p, r, rng.uniform(5, 8), "secretion"))
        if variant == "adenosis":
            layout.add("stroma", irregular_polygon(center, 450, 380, rng, 40, 0.15))
            return _crowded_ducts(layout, center, 380, int(rng.integers(30, 55)), (12, 22),
                                  lambda p, r: layout.duct(p, r, 9, "lumen"))
        radius = rng.uniform(600, 1000)
        layout.add("loose_stroma", irregular_polygon(center, radius, radius * 0.75, rng, 48, 0.1))
        for _ in range(int(rng.integers(8, 16))):
            angle, radial = rng.uniform(0, 2 * np.pi), rng.uniform(0, 0.75) * radius * 0.7
            point = (center[0] + radial * np.cos(angle), center[1] + radial * np.sin(angle))
            wall = layout.add("epithelium", irregular_polygon(point, rng.uniform(80, 200), rng.uniform(14, 24), rng,
                                                               24, 0.2))
            layout.add("lumen", scaled(wall, point, 0.45))
        return radius * 1.05
    if label == "UDH":
        def filled(point, r):
            layout.duct(point, r, 10, "usual_hyperplasia")
            _holes(layout, point, r, int(rng.integers(4, 10)), (6, 14), near_rim=True)
        return _crowded_ducts(layout, center, 300, int(rng.integers(2, 6)), (110, 260), filled)
    if label == "FEA":
        return _crowded_ducts(layout, center, 380, int(rng.integers(10, 24)), (40, 85),
                              lambda p, r: layout.duct(p, r, rng.uniform(14, 22), "secretion", "atypical"))
    if label in ("ADH", "DCIS"):
        grade = "high_grade" if label == "DCIS" and rng.random() < 0.45 else "atypical"
        count, radii = ((1, 3), (110, 200)) if label == "ADH" else ((3, 9), (170, 420))

        def filled(point, r):
            layout.duct(point, r, 10, grade)
            if grade == "high_grade" and rng.random() < 0.7:
                layout.add("necrosis", circle(point, r * rng.uniform(0.3, 0.5), rng, 0.12))
            elif rng.random() < 0.75:
                _holes(layout, point, r, int(r / 12), (8, 20))
            if label == "ADH":  # only partly involved: a residual lumen with normal epithelium
                layout.add("lumen", circle((point[0] + r * 0.45, point[1]), r * 0.3, rng))
        return _crowded_ducts(layout, center, 250 if label == "ADH" else 900, int(rng.integers(*count)), radii,
                              filled)
    if label == "IC":
        radius = rng.uniform(500, 1100)
        layout.add("desmoplasia", irregular_polygon(center, radius, radius * rng.uniform(0.6, 0.9), rng, 64, 0.25))
        for _ in range(int(rng.integers(60, 160))):
            angle, radial = rng.uniform(0, 2 * np.pi), np.sqrt(rng.uniform(0, 1)) * radius * 0.75
            point = (center[0] + radial * np.cos(angle), center[1] + radial * np.sin(angle))
            if rng.random() < 0.3:  # single-file cords
                layout.add("invasive", irregular_polygon(point, rng.uniform(30, 90), rng.uniform(5, 8), rng, 12, 0.1))
            else:
                size = rng.uniform(12, 60)
                layout.add("invasive", irregular_polygon(point, size, size * rng.uniform(0.5, 1), rng, 16, 0.3))
        return radius * 0.95
    raise ValueError(f"unknown BRACS label {label!r}")


def _breast_fragments(layout: SlideLayout) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """One to three pieces of breast tissue anywhere on the glass (an excision is often cut into several),
    together about a quarter of the slide; returns (centre, radii) per piece."""
    rng, pieces = layout.rng, []
    for index in range(int(rng.choice([1, 2, 2, 3]))):
        scale = 1.0 if index == 0 else rng.uniform(0.35, 0.6)
        radii = (layout.width * rng.uniform(0.20, 0.30) * scale, layout.height * rng.uniform(0.24, 0.34) * scale)
        center = layout.place(radii, pieces)
        if center is not None:
            pieces.append((center, radii))
            layout.add("stroma", irregular_polygon(center, *radii, rng, 96, 0.12))
    return pieces


def bracs_scene(label: str, size: tuple[int, int], rng: np.random.Generator, seed_parts: tuple):
    """(scene, [(label, RoI polygon in level-0 px)]): breast tissue with lesions up to ``label``."""
    mpp = slide_mpp(size)
    layout = SlideLayout(size[0] * mpp, size[1] * mpp, rng)
    pieces = _breast_fragments(layout)
    areas = np.array([np.pi * radii[0] * radii[1] / 1e6 for _, radii in pieces])  # mm²

    def anywhere(clearance: float, fraction: float):
        """A spot in a piece chosen by area: every square millimetre of tissue is equally likely."""
        center, radii = pieces[int(rng.choice(len(pieces), p=areas / areas.sum()))]
        return layout.spot(center, radii, clearance, fraction)

    def per_mm2(rate: float) -> int:
        return int(rng.poisson(rate * areas.sum()))

    for _ in range(per_mm2(0.16)):
        r = rng.uniform(0.3, 0.9) * 1000
        layout.add("fat", irregular_polygon(anywhere(0, 0.85), r, r * rng.uniform(0.6, 1.0), rng, 40, 0.2))
    for _ in range(per_mm2(0.30)):  # background normal lobules (cellular: blue at low power) and ducts
        _lobule(layout, anywhere(300, 0.8), rng.uniform(200, 420))
    for _ in range(per_mm2(0.12)):
        layout.duct(anywhere(0, 0.75), rng.uniform(50, 130), rng.uniform(9, 12), "lumen")
    # lymphocytic infiltrates, the densest tissue on any breast slide, more of them around carcinoma
    for _ in range(per_mm2(0.12 if label in ("DCIS", "IC") else 0.07)):
        r = rng.uniform(80, 400)
        layout.add("lymphoid", irregular_polygon(anywhere(0, 0.8), r, r * rng.uniform(0.5, 1.0), rng, 32, 0.25))
    for _ in range(per_mm2(0.15)):
        point = anywhere(0, 0.8)
        vessel = layout.add("vessel", circle(point, rng.uniform(15, 60), rng, 0.1, 16))
        layout.add("lumen", scaled(vessel, point, 0.5))
    severity = BRACS_LABELS.index(label)
    lesions = [label]
    lesser = [other for other in BRACS_LABELS[1:severity]]
    for _ in range(int(rng.integers(1, 4))):
        if lesser:
            lesions.append(str(rng.choice(lesser)))
    rois = []
    for lesion in lesions:  # anywhere in the tissue, apart from each other
        point = anywhere(1000, 0.8)
        reach = _bracs_lesion(layout, lesion, point)
        layout.taken.append((*point, reach))
        roi = irregular_polygon(point, reach + 30, (reach + 30) * 0.95, rng, 32, 0.04)
        rois.append((lesion, polygon_px(roi, mpp)))
    return SlideScene(size[0], size[1], mpp, layout.structures, seed_parts), rois


def geojson_export(regions: list[tuple[str, list]]) -> dict:
    """A QuPath "Export objects as GeoJSON" FeatureCollection of annotation polygons with classifications."""
    features = []
    for index, (label, polygon) in enumerate(regions):
        ring = [list(point) for point in polygon] + [list(polygon[0])]
        features.append(
            {
                "type": "Feature",
                "id": f"00000000-0000-0000-0000-{index:012d}",
                "geometry": {"type": "Polygon", "coordinates": [ring]},
                "properties": {"objectType": "annotation", "classification": {"name": label, "color": [255, 0, 0]}},
            }
        )
    return {"type": "FeatureCollection", "features": features}


def deterministic_xlsx(rows: list[list], sheet: str) -> bytes:
    """An .xlsx whose bytes depend only on ``rows``: fixed document dates and zip entry times."""
    import datetime

    from openpyxl import Workbook

    workbook = Workbook()
    worksheet = workbook.active
    worksheet.title = sheet
    for row in rows:
        worksheet.append(row)
    fixed = datetime.datetime(2022, 1, 1)
    workbook.properties.created = workbook.properties.modified = fixed
    buffer = io.BytesIO()
    workbook.save(buffer)
    output = io.BytesIO()
    with zipfile.ZipFile(buffer) as source, zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as target:
        for name in sorted(source.namelist()):
            data = source.read(name)
            if name == "docProps/core.xml":  # openpyxl stamps the save time into "modified"
                data = re.sub(rb"(<dcterms:modified[^>]*>)[^<]*", rb"\g<1>2022-01-01T00:00:00Z", data)
            target.writestr(
                zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)),
                data,
                compress_type=zipfile.ZIP_DEFLATED,
            )
    return output.getvalue()


def _write_bracs_slide(folder: Path, slide_id: str, label: str, size: tuple[int, int], seed: int) -> None:
    """One BRACS slide and its GeoJSON export (a worker-process job)."""
    scene, rois = bracs_scene(label, size, rng_for(seed, "bracs", slide_id), (seed, "bracs", slide_id))
    write_scene(folder / f"{slide_id}.svs", scene, aperio=True)
    (folder / f"{slide_id}.geojson").write_text(json.dumps(geojson_export(rois), indent=1) + "\n")


def write_bracs(root: Path, seed: int, cases: int, size: tuple[int, int], workers: int = 1) -> list[str]:
    """``BRACS_WSI/test/Group_*/Type_*/BRACS_<id>.svs`` + GeoJSON exports + ``BRACS.xlsx``
    (WSI_Information); labels follow the BRACS class frequencies."""
    rows = [["WSI Filename", "Patient Id", "Set", "WSI label"]]
    labels = allocate(BRACS_PRIORS, cases, rng_for(seed, "bracs-labels"))
    jobs, written = [], []
    for index, label in enumerate(labels):
        slide_id = f"BRACS_{1001 + index}"
        folder = root / "BRACS_WSI" / "test" / f"Group_{BRACS_GROUPS[label]}" / f"Type_{label}"
        jobs.append((folder, slide_id, label, tuple(size), seed))
        rows.append([slide_id, f"{200 + index}", "test", label if index % 3 else f"Type_{label}"])
        written.append(slide_id)
    run_jobs(_write_bracs_slide, jobs, workers)
    (root / "BRACS.xlsx").write_bytes(deterministic_xlsx(rows, "WSI_Information"))
    return written


def write_synthetic(root: Path, config) -> list[str]:
    """This module's share of the embedded cohort at the sizes of ``config`` (a ``synthetic.cohort.CohortConfig``):
    the spec's ``write_synthetic``."""
    return write_bracs(root, config.seed, config.cases, tuple(config.slide_size), config.workers)

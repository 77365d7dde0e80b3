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

import csv
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np

from ..labels import BRACS_LABELS
from .common import allocate, rng_for, run_jobs
from .tissue import SlideScene, Structure, irregular_polygon, max_diameter, scaled, write_scene, write_strips

SLIDE_WIDTH_UM = 24576.0  # physical width of every synthetic slide (µm); the height follows the aspect ratio
BRACS_GROUPS = {"N": "BT", "PB": "BT", "UDH": "BT", "FEA": "AT", "ADH": "AT", "DCIS": "MT", "IC": "MT"}
# WSI labels of the 547 BRACS slides (Brancati et al. 2022): mostly benign and invasive.
BRACS_PRIORS = {"N": 44, "PB": 147, "UDH": 74, "FEA": 41, "ADH": 48, "DCIS": 61, "IC": 132}
# CAMELYON17 node labels, enriched for positives as the benchmark set is (a constant "negative" answer would
# otherwise outscore every model: the 500 training nodes are 64 % negative). No class above 0.30, so no constant
# answer reaches the best model's Task (0.35); among positives the real mix (ITC 20 %, micro 32 %, macro 48 %)
# is kept within five points.
CAMELYON_PRIORS = {"negative": 0.30, "itc": 0.14, "micro": 0.26, "macro": 0.30}
METASTASIS_DIAMETER_UM = {"itc": (50.0, 170.0), "micro": (300.0, 1800.0), "macro": (2300.0, 4000.0)}


def slide_mpp(size: tuple[int, int]) -> float:
    return SLIDE_WIDTH_UM / size[0]


def write_pyramid(path: Path, image, mpp: float, aperio: bool, levels: int = 4) -> None:
    """A pyramid of one in-memory image (small fixtures); cohort slides stream through :func:`write_scene`."""
    write_strips(Path(path), image.size[0], image.size[1], [np.asarray(image.convert("RGB"))], mpp, aperio, levels)


def _in_px(polygon, mpp: float) -> list[list[float]]:
    """A scene polygon (µm) as level-0 pixel coordinates, the way the annotation files store them."""
    return [[round(x / mpp, 1), round(y / mpp, 1)] for x, y in polygon]


def _circle(center, radius, rng, roughness=0.05, points=28):
    return irregular_polygon(center, radius, radius * rng.uniform(0.85, 1.0), rng, points, roughness)


class _Layout:
    """Collects structures (µm) and places non-overlapping features inside a tissue outline."""

    def __init__(self, width_um: float, height_um: float, rng: np.random.Generator):
        self.width, self.height, self.rng = width_um, height_um, rng
        self.structures: list[Structure] = []
        self.taken: list[tuple[float, float, float]] = []

    def place(self, radii: tuple[float, float], pieces: list, tries: int = 80):
        """A centre anywhere on the glass for an elliptic piece of tissue with ``radii`` that keeps clear of the
        slide edge and of the ``pieces`` (centre, radii) already placed; None when none fits."""
        for _ in range(tries):
            center = (self.rng.uniform(radii[0] * 1.15, self.width - radii[0] * 1.15),
                      self.rng.uniform(radii[1] * 1.15, self.height - radii[1] * 1.15))
            if all(np.hypot((center[0] - c[0]) / (radii[0] + r[0]), (center[1] - c[1]) / (radii[1] + r[1])) > 0.75
                   for c, r in pieces):
                return center
        return None

    def add(self, kind: str, polygon) -> list:
        self.structures.append(Structure(kind, tuple(polygon)))
        return polygon

    def spot(self, center, radii, clearance: float, fraction: float = 0.8, tries: int = 60):
        """A point inside the ellipse (center, radii * fraction) at least ``clearance`` from taken spots."""
        for _ in range(tries):
            angle, radial = self.rng.uniform(0, 2 * np.pi), np.sqrt(self.rng.uniform(0, 1)) * fraction
            point = (center[0] + radii[0] * radial * np.cos(angle), center[1] + radii[1] * radial * np.sin(angle))
            if all(np.hypot(point[0] - x, point[1] - y) >= clearance + r for x, y, r in self.taken):
                return point
        return point

    def duct(self, center, radius, wall: float, fill: str, epithelium: str = "epithelium") -> None:
        rng = self.rng
        outer = self.add(epithelium, _circle(center, radius, rng))
        if radius - wall > 3:
            self.add(fill, scaled(outer, center, (radius - wall) / radius))


# ------------------------------------------------------------------------------------------------ BRACS
def _lobule(layout: _Layout, center, radius) -> float:
    rng = layout.rng
    layout.add("loose_stroma", irregular_polygon(center, radius, radius * rng.uniform(0.7, 1.0), rng, 40, 0.12))
    placed = []
    for _ in range(int(rng.integers(25, 60))):  # packed acini: a lobule is blue at low power
        r = rng.uniform(16, 30)
        for _ in range(20):
            angle, radial = rng.uniform(0, 2 * np.pi), np.sqrt(rng.uniform(0, 1)) * (radius * 0.8 - r)
            point = (center[0] + radial * np.cos(angle), center[1] + radial * np.sin(angle))
            if all(np.hypot(point[0] - x, point[1] - y) > r + q + 4 for x, y, q in placed):
                placed.append((*point, r))
                layout.duct(point, r, rng.uniform(8, 11), "lumen" if rng.random() < 0.7 else "secretion")
                break
    return radius


def _crowded_ducts(layout: _Layout, center, extent, count, radius_range, build) -> float:
    """``count`` ducts around ``center`` within ``extent`` µm, each drawn by ``build(point, radius)``; returns
    the lesion's reach (for its RoI)."""
    rng, placed, reach = layout.rng, [], 0.0
    for _ in range(count):
        r = rng.uniform(*radius_range)
        for _ in range(30):
            angle, radial = rng.uniform(0, 2 * np.pi), np.sqrt(rng.uniform(0, 1)) * extent
            point = (center[0] + radial * np.cos(angle), center[1] + radial * np.sin(angle))
            if all(np.hypot(point[0] - x, point[1] - y) > r + q + 15 for x, y, q in placed):
                placed.append((*point, r))
                build(point, r)
                reach = max(reach, np.hypot(point[0] - center[0], point[1] - center[1]) + r)
                break
    return reach


def _holes(layout: _Layout, center, radius, count, hole_range, kind="lumen", near_rim=False) -> None:
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
            layout.add(kind, _circle(point, r, rng, 0.02, 16))


def _bracs_lesion(layout: _Layout, label: str, center) -> float:
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
                layout.add("necrosis", _circle(point, r * rng.uniform(0.3, 0.5), rng, 0.12))
            elif rng.random() < 0.75:
                _holes(layout, point, r, int(r / 12), (8, 20))
            if label == "ADH":  # only partly involved: a residual lumen with normal epithelium
                layout.add("lumen", _circle((point[0] + r * 0.45, point[1]), r * 0.3, rng))
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


def _breast_fragments(layout: _Layout) -> list[tuple[tuple[float, float], tuple[float, float]]]:
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
    layout = _Layout(size[0] * mpp, size[1] * mpp, rng)
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
        vessel = layout.add("vessel", _circle(point, rng.uniform(15, 60), rng, 0.1, 16))
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
        rois.append((lesion, _in_px(roi, mpp)))
    return SlideScene(size[0], size[1], mpp, layout.structures, seed_parts), rois


# ------------------------------------------------------------------------------------------------ CAMELYON17
def _metastasis(layout: _Layout, category: str, center) -> list:
    rng = layout.rng
    low, high = METASTASIS_DIAMETER_UM[category]
    diameter = rng.uniform(low * 1.05, high * 0.95)
    polygon = irregular_polygon(center, diameter / 2, diameter / 2 * rng.uniform(0.55, 0.9), rng, 48, 0.18)
    polygon = scaled(polygon, center, diameter / max_diameter(polygon))
    layout.add("metastasis", polygon)
    return polygon


def _lymph_node(layout: _Layout, center, radii) -> None:
    """One node section: perinodal fat, capsule, subcapsular sinus, cortex with follicles, medullary sinuses,
    sinus histiocytes (pale clusters that mimic tumour cells) and hilar vessels."""
    rng = layout.rng
    node = irregular_polygon(center, *radii, rng, 96, 0.08)
    layout.add("fat", scaled(node, center, 1.12))
    layout.add("capsule", node)
    layout.add("sinus", scaled(node, center, 0.975))
    layout.add("lymphoid", scaled(node, center, 0.955))

    def at(radial, angle=None):
        angle = rng.uniform(0, 2 * np.pi) if angle is None else angle
        return center[0] + radii[0] * radial * np.cos(angle), center[1] + radii[1] * radial * np.sin(angle)

    scale = min(radii) / 2000.0
    for _ in range(int(rng.integers(10, 22))):  # medulla: sinuses between medullary cords
        point = at(np.sqrt(rng.uniform(0, 1)) * 0.5)
        layout.add("sinus", irregular_polygon(point, rng.uniform(120, 320) * scale, rng.uniform(40, 120) * scale,
                                              rng, 20, 0.3))
    for _ in range(int(rng.integers(4, 13))):  # cortical follicles, most with a germinal centre
        point = at(rng.uniform(0.7, 0.86))
        r = rng.uniform(170, 420) * max(scale, 0.5)
        follicle = layout.add("mantle", _circle(point, r, rng, 0.08))
        if rng.random() < 0.75:
            layout.add("germinal", scaled(follicle, point, rng.uniform(0.55, 0.75)))
    for _ in range(int(rng.integers(1, 7))):
        point = at(rng.uniform(0.1, 0.5) if rng.random() < 0.6 else rng.uniform(0.9, 0.95))
        r = rng.uniform(60, 380) * max(scale, 0.5)
        layout.add("histiocytes", irregular_polygon(point, r, r * rng.uniform(0.4, 0.9), rng, 24, 0.25))
    for _ in range(int(rng.integers(2, 7))):
        point = at(np.sqrt(rng.uniform(0, 1)) * 0.5)
        vessel = layout.add("vessel", _circle(point, rng.uniform(20, 80), rng, 0.1, 16))
        layout.add("lumen", scaled(vessel, point, 0.55))


def _node_sections(layout: _Layout, count: int) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """Up to ``count`` non-overlapping node sections anywhere on the glass: one of 5-10 mm, smaller ones of
    2-6 mm (CAMELYON17 nodes range from a few millimetres to over a centimetre)."""
    rng, nodes = layout.rng, []
    for index in range(count):
        size = 1000 * (rng.uniform(2.5, 3.7) if index == 0 else rng.uniform(1.0, 2.2))  # y semi-axis, µm
        radii = (size * rng.uniform(1.0, 1.35), size)
        center = layout.place(radii, nodes)
        if center is not None:
            nodes.append((center, radii))
            _lymph_node(layout, center, radii)
    return nodes


def camelyon_scene(category: str, size: tuple[int, int], rng: np.random.Generator, seed_parts: tuple):
    """(scene, [(ASAP group, polygon in level-0 px)]): node sections with metastases of at most ``category``."""
    mpp = slide_mpp(size)
    layout = _Layout(size[0] * mpp, size[1] * mpp, rng)
    nodes = _node_sections(layout, int(rng.choice([1, 2, 2, 3, 3])))
    groups = []
    if category != "negative":
        # the largest deposit sets the category; further deposits are mostly smaller (ITC clusters, micro)
        smaller = {"itc": ["itc"], "micro": ["itc", "micro"], "macro": ["itc", "micro", "micro", "macro"]}[category]
        found = [category] + [str(rng.choice(smaller)) for _ in range(int(rng.geometric(0.55)) - 1)]
        for index, lesion in enumerate(found):
            reach = METASTASIS_DIAMETER_UM[lesion][1] / 2
            fitting = [node for node in nodes if min(node[1]) > reach * 1.2] or nodes[:1]
            center, radii = fitting[int(rng.integers(0, len(fitting)))]
            if lesion == "itc" and rng.random() < 0.6:  # isolated tumour cells arrive in the subcapsular sinus
                angle = rng.uniform(0, 2 * np.pi)
                point = (center[0] + radii[0] * 0.93 * np.cos(angle), center[1] + radii[1] * 0.93 * np.sin(angle))
            else:
                room = max(1.0 - reach * 1.1 / min(radii), 0.05)
                point = layout.spot(center, radii, reach * 0.6, room)
            polygon = _metastasis(layout, lesion, point)
            layout.taken.append((*point, max_diameter(polygon) / 2))
            groups.append(("_0", polygon))
            if lesion == "macro" and index == 0:  # central necrosis, annotated as an exclusion
                hole = layout.add("necrosis", irregular_polygon(point, max_diameter(polygon) * 0.12,
                                                                max_diameter(polygon) * 0.08, rng, 16, 0.2))
                groups.append(("_2", hole))
    in_px = [(group, _in_px(polygon, mpp)) for group, polygon in groups]
    return SlideScene(size[0], size[1], mpp, layout.structures, seed_parts), in_px


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


def asap_xml(groups: list[tuple[str, list]]) -> str:
    """ASAP annotation XML with one polygon per (PartOfGroup, polygon)."""
    lines = ['<?xml version="1.0"?>', "<ASAP_Annotations>", "\t<Annotations>"]
    for index, (group, polygon) in enumerate(groups):
        lines.append(f'\t\t<Annotation Name="Annotation {index}" Type="Polygon" PartOfGroup="{group}" Color="#F4FA58">')
        lines.append("\t\t\t<Coordinates>")
        for order, (x, y) in enumerate(polygon):
            lines.append(f'\t\t\t\t<Coordinate Order="{order}" X="{x}" Y="{y}" />')
        lines.extend(["\t\t\t</Coordinates>", "\t\t</Annotation>"])
    lines.extend(["\t</Annotations>", "\t<AnnotationGroups>"])
    for group in sorted({group for group, _ in groups}):
        lines.append(f'\t\t<Group Name="{group}" PartOfGroup="None" Color="#64FE2E"><Attributes /></Group>')
    lines.extend(["\t</AnnotationGroups>", "</ASAP_Annotations>", ""])
    return "\n".join(lines)


def pn_stage(categories: list[str]) -> str:
    macro = categories.count("macro")
    micro = categories.count("micro")
    if macro + micro == 0:
        return "pN0(i+)" if "itc" in categories else "pN0"
    if macro == 0:
        return "pN1mi"
    return "pN1" if macro + micro <= 3 else "pN2"


def _write_camelyon_slide(root: Path, name: str, category: str, size: tuple[int, int], seed: int) -> None:
    """One lymph-node slide and, when positive, its ASAP XML (a worker-process job)."""
    scene, groups = camelyon_scene(category, size, rng_for(seed, "camelyon", name), (seed, "camelyon", name))
    write_scene(root / "training" / "center_0" / f"{name}.tif", scene, aperio=False)
    if groups:
        path = root / "training" / "lesion_annotations" / f"{name}.xml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(asap_xml(groups))


def write_camelyon(root: Path, seed: int, cases: int, size: tuple[int, int], workers: int = 1) -> list[str]:
    """``training/center_0/patient_NNN_node_K.tif`` + ``lesion_annotations/*.xml`` + ``stage_labels.csv``."""
    categories = allocate(CAMELYON_PRIORS, cases, rng_for(seed, "camelyon-labels"))
    nodes_per_patient = 5
    stage_rows, written, jobs = [], [], []
    by_patient: dict[str, list[str]] = {}
    for index, category in enumerate(categories):
        patient, node = divmod(index, nodes_per_patient)
        name = f"patient_{patient:03d}_node_{node}"
        jobs.append((root, name, category, tuple(size), seed))
        by_patient.setdefault(f"patient_{patient:03d}", []).append(category)
        stage_rows.append((f"{name}.tif", category))
        written.append(name)
    run_jobs(_write_camelyon_slide, jobs, workers)
    with open(root / "training" / "stage_labels.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["patient", "stage"])
        for patient, found in sorted(by_patient.items()):
            writer.writerow([f"{patient}.zip", pn_stage(found)])
            writer.writerows(row for row in stage_rows if row[0].startswith(patient + "_"))
    return written

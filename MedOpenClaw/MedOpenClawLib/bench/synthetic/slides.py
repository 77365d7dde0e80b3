"""Synthetic whole-slide images: pyramidal tiled JPEG TIFFs (OpenSlide/tiffslide readable) with annotated
regions.

BRACS slides are written as Aperio-style ``.svs`` with one QuPath GeoJSON export per slide (what exporting the
distributed ``.qpdata`` with QuPath's "Export objects as GeoJSON" produces) and the ``BRACS.xlsx`` label
sheet;
CAMELYON17 slides are generic pyramidal ``.tif`` with ASAP XML lesion annotations and ``stage_labels.csv``.
Region appearance (colour, nuclear density and size) differs per BRACS class and for metastases.
CAMELYON17 synthetic slides use 1.0 um/px, so ITC < 200 px, micro-metastasis 200-2000 px, macro > 2000 px.
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
from .common import rng_for

TILE = 256
BACKGROUND = (243, 241, 244)
STROMA = (232, 178, 206)
CLASS_LOOK = {  # fill colour, nuclei per 10^4 px^2, nucleus radius px, nucleus colour
    "N": ((236, 196, 214), 1.0, 3, (120, 70, 150)),
    "PB": ((228, 180, 210), 2.0, 3, (110, 60, 150)),
    "UDH": ((222, 165, 205), 4.0, 3, (100, 55, 145)),
    "FEA": ((214, 160, 210), 5.0, 4, (95, 50, 150)),
    "ADH": ((205, 150, 205), 6.5, 4, (85, 45, 145)),
    "DCIS": ((190, 135, 200), 8.0, 5, (70, 35, 140)),
    "IC": ((175, 120, 195), 10.0, 5, (60, 30, 130)),
    "tumor": ((170, 110, 190), 11.0, 5, (55, 25, 125)),
    "exclusion": ((248, 246, 248), 0.0, 0, (0, 0, 0)),
}
BRACS_GROUPS = {"N": "BT", "PB": "BT", "UDH": "BT", "FEA": "AT", "ADH": "AT", "DCIS": "MT", "IC": "MT"}
METASTASIS_DIAMETER_PX = {"itc": 120, "micro": 1000, "macro": 2800}


def blob(center, radius_x, radius_y, rng, points: int = 24) -> list[list[float]]:
    """A closed irregular polygon (list of [x, y] level-0 px) around ``center``."""
    angles = np.linspace(0, 2 * np.pi, points, endpoint=False)
    wobble = 1.0 + 0.12 * rng.standard_normal(points)
    return [
        [round(float(center[0] + radius_x * w * np.cos(a)), 1), round(float(center[1] + radius_y * w * np.sin(a)), 1)]
        for a, w in zip(angles, np.clip(wobble, 0.75, 1.25), strict=True)
    ]


def paint_slide(size: tuple[int, int], regions: list[tuple[str, list]], rng: np.random.Generator):
    """RGB PIL image: background, a tissue blob, then each (look, polygon) region with its nuclei."""
    from PIL import Image, ImageDraw, ImageFilter

    width, height = size
    image = Image.new("RGB", size, BACKGROUND)
    draw = ImageDraw.Draw(image)
    tissue = blob((width / 2, height / 2), width * 0.42, height * 0.40, rng, 40)
    draw.polygon([tuple(point) for point in tissue], fill=STROMA)
    small = (max(width // 32, 8), max(height // 32, 8))
    noise = Image.fromarray(rng.integers(0, 40, (small[1], small[0]), dtype=np.uint8), "L").resize(size, Image.BILINEAR)
    image = Image.composite(image, Image.new("RGB", size, (200, 140, 185)), noise.point(lambda v: 255 - v))
    draw = ImageDraw.Draw(image)
    for look, polygon in regions:
        fill, density, radius, nucleus = CLASS_LOOK[look]
        draw.polygon([tuple(point) for point in polygon], fill=fill)
        if density <= 0:
            continue
        xs, ys = zip(*polygon, strict=True)
        box = (min(xs), min(ys), max(xs), max(ys))
        count = int(density * (box[2] - box[0]) * (box[3] - box[1]) / 1e4)
        from ..scoring.geometry import point_in_polygon

        for x, y in zip(rng.uniform(box[0], box[2], count), rng.uniform(box[1], box[3], count), strict=True):
            if point_in_polygon(x, y, polygon):
                draw.ellipse((x - radius, y - radius, x + radius, y + radius), fill=nucleus)
    return image.filter(ImageFilter.SMOOTH) if min(size) < 4096 else image


def write_pyramid(path: Path, image, mpp: float, aperio: bool, levels: int = 4) -> None:
    """Tiled JPEG pyramid, each level a 4x downsample, as consecutive IFDs (what OpenSlide expects)."""
    import tifffile
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    width, height = image.size
    description = None
    if aperio:
        description = (
            f"Aperio Image Library v12.0.15\r\n{width}x{height} [0,0 {width}x{height}] ({TILE}x{TILE}) "
            f"JPEG/RGB Q=80|AppMag = 20|MPP = {mpp}"
        )
    per_cm = 10000.0 / mpp
    with tifffile.TiffWriter(path) as writer:
        level_image = image
        for level in range(levels):
            factor = 4**level
            if level:
                level_image = image.resize((max(width // factor, 1), max(height // factor, 1)), Image.BOX)
                if min(level_image.size) < TILE // 2:
                    break
            writer.write(
                np.asarray(level_image),
                tile=(TILE, TILE),
                compression="jpeg",
                compressionargs={"level": 80},
                photometric="rgb",
                subfiletype=1 if level else 0,
                metadata=None,
                description=description if level == 0 else None,
                resolution=(per_cm / factor, per_cm / factor),
                resolutionunit="CENTIMETER",
            )


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


def write_bracs(root: Path, seed: int, cases: int, size: tuple[int, int]) -> list[str]:
    """``BRACS_WSI/test/Group_*/Type_*/BRACS_<id>.svs`` + GeoJSON exports + ``BRACS.xlsx``
    (WSI_Information)."""
    rows = [["WSI Filename", "Patient Id", "Set", "WSI label"]]
    written = []
    width, height = size
    for index in range(cases):
        label = BRACS_LABELS[index % len(BRACS_LABELS)]
        slide_id = f"BRACS_{1001 + index}"
        rng = rng_for(seed, "bracs", slide_id)
        regions = [(label, blob((width * 0.40, height * 0.45), width * 0.08, height * 0.09, rng))]
        if label != "N":  # a benign decoy region of another class: evidence must hit the matching class
            regions.append(
                (
                    "PB" if label != "PB" else "UDH",
                    blob((width * 0.64, height * 0.58), width * 0.06, height * 0.07, rng),
                )
            )
        image = paint_slide(size, regions, rng)
        folder = root / "BRACS_WSI" / "test" / f"Group_{BRACS_GROUPS[label]}" / f"Type_{label}"
        write_pyramid(folder / f"{slide_id}.svs", image, mpp=0.5, aperio=True)
        (folder / f"{slide_id}.geojson").write_text(json.dumps(geojson_export(regions), indent=1) + "\n")
        rows.append([slide_id, f"{200 + index}", "test", label if index % 3 else f"Type_{label}"])
        written.append(slide_id)
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


def write_camelyon(root: Path, seed: int, cases: int, size: tuple[int, int]) -> list[str]:
    """``training/center_0/patient_NNN_node_K.tif`` + ``lesion_annotations/*.xml`` + ``stage_labels.csv``."""
    categories = ("negative", "macro", "micro", "itc", "macro", "negative")
    width, height = size
    nodes_per_patient = 5
    stage_rows, written = [], []
    by_patient: dict[str, list[str]] = {}
    for index in range(cases):
        patient, node = divmod(index, nodes_per_patient)
        category = categories[index % len(categories)]
        name = f"patient_{patient:03d}_node_{node}"
        rng = rng_for(seed, "camelyon", name)
        groups: list[tuple[str, list]] = []
        if category != "negative":
            radius = METASTASIS_DIAMETER_PX[category] / 2
            center = (width * rng.uniform(0.35, 0.6), height * rng.uniform(0.4, 0.6))
            groups.append(("_0", blob(center, radius, radius * 0.85, rng)))
            if category == "macro":  # a non-tumour hole annotated as an exclusion region
                groups.append(("_2", blob(center, radius * 0.25, radius * 0.2, rng, 12)))
        looks = [("tumor" if group != "_2" else "exclusion", polygon) for group, polygon in groups]
        image = paint_slide(size, looks, rng)
        write_pyramid(root / "training" / "center_0" / f"{name}.tif", image, mpp=1.0, aperio=False)
        if groups:
            path = root / "training" / "lesion_annotations" / f"{name}.xml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(asap_xml(groups))
        by_patient.setdefault(f"patient_{patient:03d}", []).append(category)
        stage_rows.append((f"{name}.tif", category))
        written.append(name)
    with open(root / "training" / "stage_labels.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["patient", "stage"])
        for patient, found in sorted(by_patient.items()):
            writer.writerow([f"{patient}.zip", pn_stage(found)])
            writer.writerows(row for row in stage_rows if row[0].startswith(patient + "_"))
    return written

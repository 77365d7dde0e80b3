"""BRACS slides -> case packages with ROI polygons in level-0 pixels.

BRACS: slides ``BRACS_WSI/{split}/Group_*/Type_*/BRACS_<id>.svs``; labels from ``BRACS.xlsx`` sheet
``WSI_Information`` (normalised to N, PB, UDH, FEA, ADH, DCIS, IC; a disagreeing ``Type_*`` folder skips the
case); ROIs from one QuPath GeoJSON export per slide (``<id>.geojson`` anywhere under the source). BRACS ships
QuPath ``.qpdata`` projects: export each once with QuPath ("File > Export objects as GeoJSON", or
``exportAllObjectsToGeoJson`` in a script: ``QuPathBridge/scripts/export_geojson.groovy`` does it for a whole
project, "Run for project") before preparing. A slide without an export is kept with ``evidence:
unavailable`` in its ground truth (and brief): Strict = Task there (Table 4 gates evidence-scored cases only), and
it is outside Loc.
Per-class counts (all cases, and those with evidence) are written to the manifest and printed at prepare.

A GeoJSON ROI keeps its interior rings as holes (a click in one is a miss), every part of a MultiPolygon is a
region, and each target region gets a reference point clear of the exclusions (:func:`..kit.loading.region_records`).
A region that cannot be used is dropped with its reason counted in the manifest (``dropped_regions``); a slide is
skipped only when it had target regions and none remains.
"""

from __future__ import annotations

import json
from pathlib import Path

from ....core.hygiene import bounded_message
from ...cases import GroundTruth
from ...kit.loading import SkipCase, find_one, place_slide, region_records, slide_case
from ...package import PackageWriter
from .labels import normalize_bracs_label


def bracs_labels(xlsx: Path) -> dict[str, str | None]:
    from openpyxl import load_workbook

    workbook = load_workbook(xlsx, read_only=True, data_only=True)
    if "WSI_Information" not in workbook.sheetnames:
        raise SkipCase(f"{xlsx.name} has no WSI_Information sheet")
    rows = workbook["WSI_Information"].iter_rows(values_only=True)
    header = [str(cell or "").strip().lower() for cell in next(rows)]
    name_column = next((i for i, name in enumerate(header) if "filename" in name or "file name" in name), None)
    label_column = next((i for i, name in enumerate(header) if "label" in name), None)
    if name_column is None or label_column is None:
        raise SkipCase(f"{xlsx.name}: WSI_Information needs a filename and a label column, has {header}")
    labels = {}
    for row in rows:
        if row and row[name_column]:
            labels[Path(str(row[name_column]).strip()).stem] = normalize_bracs_label(str(row[label_column] or ""))
    workbook.close()
    return labels


def geojson_regions(path: Path) -> list[tuple[str, str, list]]:
    """The BRACS regions of a QuPath GeoJSON export. A malformed export (not JSON, a feature that is no object,
    nesting deeper than the parser's recursion) skips its slide with the reason instead of ending prepare."""
    try:
        return _geojson_regions(json.loads(path.read_text(encoding="utf-8")))
    except (RecursionError, ValueError, TypeError, AttributeError, KeyError, IndexError) as error:
        raise SkipCase(f"malformed GeoJSON {path.name}: {type(error).__name__}: {bounded_message(str(error), 160)}") \
            from error


def _geojson_regions(body: object) -> list[tuple[str, str, list]]:
    features = body.get("features", []) if isinstance(body, dict) else body
    regions = []
    for feature in features:
        properties = feature.get("properties") or {}
        classification = properties.get("classification") or {}
        name = classification.get("name", "") if isinstance(classification, dict) else ""
        label = normalize_bracs_label(name)
        geometry = feature.get("geometry") or {}
        if label is None:
            continue  # unclassified or non-BRACS annotations (tissue outlines, notes) carry no evidence
        polygons = {"Polygon": [geometry.get("coordinates")], "MultiPolygon": geometry.get("coordinates")}.get(
            geometry.get("type"), []
        )
        for rings in polygons:
            regions.append((label, "roi", [_open_ring(ring) for ring in rings]))  # outer ring, then its holes
    return regions


def _open_ring(ring: list) -> list[list[float]]:
    """A GeoJSON linear ring without its closing vertex (the first one repeated)."""
    points = [[float(x), float(y)] for x, y, *_ in ring]
    return points[:-1] if len(points) > 1 and points[0] == points[-1] else points


def count_class(writer: PackageWriter, label: str, evidence: str) -> None:
    """Per-class counts for the manifest (``class_counts``): cases, and how many of them are evidence-scored."""
    counts = writer.notes.setdefault("class_counts", {})
    entry = counts.setdefault(label, {"cases": 0, "evidence_available": 0})
    entry["cases"] += 1
    entry["evidence_available"] += evidence == "available"


def prepare_bracs(source: Path, writer: PackageWriter) -> None:
    try:
        labels = bracs_labels(find_one(source, "BRACS.xlsx", "BRACS.xlsx"))
    except SkipCase as error:
        raise ValueError(str(error)) from error
    qpdata = sum(1 for _ in source.rglob("*.qpdata"))
    for slide in sorted(source.rglob("BRACS_*.svs")):
        case_id = slide.stem
        if not writer.admit(case_id):
            continue
        try:
            label = labels.get(case_id)
            if label is None:
                raise SkipCase("no valid label in BRACS.xlsx")
            folder = slide.parent.name
            if folder.startswith("Type_") and normalize_bracs_label(folder) != label:
                raise SkipCase(f"folder {folder} disagrees with the BRACS.xlsx label {label}")
            exports = sorted(source.rglob(f"{case_id}.geojson"))
            regions = region_records(geojson_regions(exports[0]), writer) if exports else []
            relative, size = place_slide(slide, case_id, writer)
            case = slide_case(case_id, relative, writer)
            case.brief["annotations"] = "hidden" if exports else "none"
            evidence = "available" if label == "N" or any(r["label"] == label for r in regions) else "unavailable"
            readable = {"answer": label, "evidence": evidence}
            if writer.add(case, GroundTruth("bracs", case_id, {"answer": label}, readable, regions=regions,
                                            slide_size=size)):
                count_class(writer, label, evidence)
        except (SkipCase, ValueError, KeyError, TypeError, IndexError) as reason:
            writer.skip(case_id, reason)
    unavailable = sum(entry["cases"] - entry["evidence_available"]
                      for entry in writer.notes.get("class_counts", {}).values())
    if unavailable and qpdata:
        writer.notes["evidence_note"] = (
            f"{unavailable} slide(s) have no GeoJSON export while the source holds {qpdata} QuPath .qpdata file(s): "
            "export them with QuPathBridge/scripts/export_geojson.groovy (Run for project) and prepare again"
        )



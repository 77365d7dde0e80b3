"""BRACS and CAMELYON17 slides -> case packages with ROI / tumour / exclusion polygons in level-0 pixels.

BRACS: slides ``BRACS_WSI/{split}/Group_*/Type_*/BRACS_<id>.svs``; labels from ``BRACS.xlsx`` sheet
``WSI_Information`` (normalised to N, PB, UDH, FEA, ADH, DCIS, IC; a disagreeing ``Type_*`` folder skips the
case); ROIs from one QuPath GeoJSON export per slide (``<id>.geojson`` anywhere under the source). BRACS ships
QuPath ``.qpdata`` projects: export each once with QuPath ("File > Export objects as GeoJSON", or
``exportAllObjectsToGeoJson`` in a script: ``QuPathBridge/scripts/export_geojson.groovy`` does it for a whole
project, "Run for project") before preparing. A slide without an export is kept with ``evidence:
unavailable`` in its ground truth (and brief): Strict = Task there (Table 4 gates evidence-scored cases only), and
it is outside Loc.
Per-class counts (all cases, and those with evidence) are written to the manifest and printed at prepare.
CAMELYON17, both published layouts: the challenge's ``training/center_*/patient_NNN_node_K.tif`` with
``stage_labels.csv`` (patient, stage) and ``lesion_annotations/``, and the GigaScience/AWS release's ``images/``
with ``stages.csv`` (patient, stage, center) and ``annotations/``; slides and ``<name>.xml`` are found anywhere
under the source, and node names are read with or without ``.tif``. ASAP groups ``_0``/``_1``/``Tumor``/
``metastases`` are tumour; ``_2``/``Exclusion`` and ``normal`` (what public converters make of the regions of
normal tissue drawn inside a metastasis: holes) are exclusion regions. Any other group is left out of the
reference (its polygons are neither tumour nor exclusion) with a note per group in the manifest
(``annotation_notes``) and the slide's ground truth: the slide itself is kept.

Both: a GeoJSON ROI keeps its interior rings as holes (a click in one is a miss), every part of a MultiPolygon is
a region, and each target region gets a reference point clear of the exclusions
(:func:`.common.region_records`). A region that cannot be used is dropped with its reason counted in the
manifest (``dropped_regions``); a slide is skipped only when it had target regions and none remains.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from ...hygiene import bounded_message
from ..cases import Case, CaseFormatError, GroundTruth, PackageWriter, place_file
from ..labels import normalize_bracs_label
from .common import SkipCase, find_one, questions_for, read_csv_rows, region_records

TUMOUR_GROUPS = {"_0", "_1", "tumor", "tumour", "metastases", "metastasis"}
EXCLUSION_GROUPS = {"_2", "exclusion", "exclusions", "normal", "non-tumor", "non_tumor", "nontumor"}
STAGE_TABLES = ("stage_labels.csv", "stages.csv")  # the challenge release, the GigaScience/AWS release
METASTASIS_CATEGORIES = ("negative", "itc", "micro", "macro")


def slide_size(path: Path) -> list[int]:
    import tifffile

    try:
        with tifffile.TiffFile(path) as tiff:
            page = tiff.pages[0]
            if not page.is_tiled:
                raise SkipCase(f"{path.name} is not a tiled (pyramidal) TIFF")
            return [int(page.imagewidth), int(page.imagelength)]
    except SkipCase:
        raise
    except Exception as error:
        raise SkipCase(f"unreadable slide {path.name}: {error}") from error


def _place_slide(slide: Path, case_id: str, writer: PackageWriter) -> tuple[str, list[int]]:
    size = slide_size(slide)
    target = place_file(slide, writer.data_dir(case_id) / slide.name)
    return writer.relative(target), size


def _case(module: str, case_id: str, slide: str, writer: PackageWriter) -> Case:
    return Case(
        module=module,
        case_id=case_id,
        data_dir=writer.relative(writer.data_dir(case_id)),
        open_paths=[slide],
        slide=slide,
        questions=questions_for(module),
        brief={"case_alias": case_id},
    )


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
            relative, size = _place_slide(slide, case_id, writer)
            case = _case("bracs", case_id, relative, writer)
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


def asap_regions(path: Path) -> tuple[list[tuple[str, str, list]], dict[str, int]]:
    """(tumour and exclusion regions, polygons per group that is neither) of one ASAP XML. ASAP draws no holes:
    normal tissue inside a metastasis is an ``_2``/Exclusion polygon, subtracted from the tumour when scoring."""
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError as error:
        raise SkipCase(f"unreadable annotation XML: {error}") from error
    regions, ignored = [], {}
    for annotation in root.iter("Annotation"):
        group = (annotation.get("PartOfGroup") or "").strip()
        key = group.lower()
        if key in TUMOUR_GROUPS:
            kind = "tumor"
        elif key in EXCLUSION_GROUPS:
            kind = "exclusion"
        else:
            ignored[group] = ignored.get(group, 0) + 1
            continue
        points = sorted(annotation.iter("Coordinate"), key=lambda c: int(float(c.get("Order", 0))))
        polygon = [[float(c.get("X")), float(c.get("Y"))] for c in points]
        regions.append((kind, kind, [polygon]))
    return regions, ignored


def camelyon_labels(source: Path) -> dict[str, str]:
    """Node name -> stage label from whichever stage table the release ships (patient rows such as
    ``patient_004.zip, pN1`` are not nodes and are left out)."""
    tables = [path for name in STAGE_TABLES for path in sorted(source.rglob(name)) if path.is_file()]
    if not tables:
        raise CaseFormatError(f"{source}: no CAMELYON17 stage table ({' or '.join(STAGE_TABLES)}) found")
    labels = {}
    for row in read_csv_rows(tables[0]):
        row = {name.strip().lower(): value for name, value in row.items()}
        name = row.get("patient", "").removesuffix(".tif")
        if "_node_" in name:
            labels[name] = row.get("stage", "").strip().lower()
    return labels


def prepare_camelyon(source: Path, writer: PackageWriter) -> None:
    labels = camelyon_labels(source)
    notes: dict[str, int] = {}
    for slide in sorted(source.rglob("patient_*_node_*.tif")):
        case_id = slide.stem
        if not writer.admit(case_id):
            continue
        try:
            category = labels.get(case_id)
            if category not in METASTASIS_CATEGORIES:
                raise SkipCase(f"stage label {category!r} is not one of {', '.join(METASTASIS_CATEGORIES)}")
            annotations = sorted(source.rglob(f"{case_id}.xml"))
            polygons, ignored = asap_regions(annotations[0]) if annotations else ([], {})
            regions = region_records(polygons, writer)
            if category == "negative" and any(region["kind"] == "tumor" for region in regions):
                raise SkipCase("negative slide has tumour annotations")
            relative, size = _place_slide(slide, case_id, writer)
            presence = "no_tumor" if category == "negative" else "tumor_present"
            answers = {"tumor_presence": presence, "largest_metastasis": category}
            readable = {**answers, **({"ignored_annotation_groups": ignored} if ignored else {})}
            truth = GroundTruth("camelyon17", case_id, answers, readable, regions=regions, slide_size=size)
            if writer.add(_case("camelyon17", case_id, relative, writer), truth):
                for group, count in ignored.items():
                    notes[group] = notes.get(group, 0) + count
        except (SkipCase, ValueError, TypeError) as reason:
            writer.skip(case_id, reason)
    if notes:
        writer.notes["annotation_notes"] = [
            f"ASAP group {group!r} ({count} polygon(s)) is neither tumour nor exclusion: left out of the reference"
            for group, count in sorted(notes.items())]

"""CAMELYON17 slides -> case packages with tumour / exclusion polygons in level-0 pixels.

Both published layouts: the challenge's ``training/center_*/patient_NNN_node_K.tif`` with ``stage_labels.csv``
(patient, stage) and ``lesion_annotations/``, and the GigaScience/AWS release's ``images/`` with ``stages.csv``
(patient, stage, center) and ``annotations/``; slides and ``<name>.xml`` are found anywhere under the source, and
node names are read with or without ``.tif``. ASAP groups ``_0``/``_1``/``Tumor``/``metastases`` are tumour;
``_2``/``Exclusion`` and ``normal`` (what public converters make of the regions of normal tissue drawn inside a
metastasis: holes) are exclusion regions. Any other group is left out of the reference (its polygons are neither
tumour nor exclusion) with a note per group in the manifest (``annotation_notes``) and the slide's ground truth:
the slide itself is kept.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

from ...cases import CaseFormatError, GroundTruth
from ...kit.loading import SkipCase, place_slide, read_csv_rows, region_records, slide_case
from ...package import PackageWriter

TUMOUR_GROUPS = {"_0", "_1", "tumor", "tumour", "metastases", "metastasis"}



EXCLUSION_GROUPS = {"_2", "exclusion", "exclusions", "normal", "non-tumor", "non_tumor", "nontumor"}



STAGE_TABLES = ("stage_labels.csv", "stages.csv")  # the challenge release, the GigaScience/AWS release



METASTASIS_CATEGORIES = ("negative", "itc", "micro", "macro")



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
            relative, size = place_slide(slide, case_id, writer)
            presence = "no_tumor" if category == "negative" else "tumor_present"
            answers = {"tumor_presence": presence, "largest_metastasis": category}
            readable = {**answers, **({"ignored_annotation_groups": ignored} if ignored else {})}
            truth = GroundTruth("camelyon17", case_id, answers, readable, regions=regions, slide_size=size)
            if writer.add(slide_case(case_id, relative, writer), truth):
                for group, count in ignored.items():
                    notes[group] = notes.get(group, 0) + count
        except (SkipCase, ValueError, TypeError) as reason:
            writer.skip(case_id, reason)
    if notes:
        writer.notes["annotation_notes"] = [
            f"ASAP group {group!r} ({count} polygon(s)) is neither tumour nor exclusion: left out of the reference"
            for group, count in sorted(notes.items())]


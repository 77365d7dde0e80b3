"""NSCLC Radiogenomics: NBIA download tree + ``metadata.csv`` + clinical CSV -> nsclc case packages.

Series are found through metadata.csv's "File Location" (Windows ``.\\`` paths, relative to the manifest
folder). Every CT and PET series of the subject, across all its studies (timepoints), is placed in the package,
as the App. H.1 prompt says ("All resolved CT/PET series across available timepoints were preloaded"); each is
named as the viewer names it (series description, ``_2``, ``_3`` for repeats in folder order). The tumour mask
is the DICOM SEG (read with highdicom) on the CT it references -- the source series of the evidence -- written as
NIfTI with that CT's geometry converted from DICOM LPS to RAS. Clinical labels ("Histology " with a trailing
space, T/N stage, grade, the seven "Tumor Location (choice=...)" columns) map to the five questions of App. H.1;
a value MedFlow-Bench's options cannot express ("Unknown" location or two lobes ticked, T stage "Tis", grade "Not
Collected") keeps the case with that question unscored. AMC cases are excluded unless ``include_amc``; every
other exclusion is counted under the step that made it (clinical row, SEG on its CT, PET and CT series).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ....viewer.dicom_series import SeriesSplit, split_series
from ....viewer.loading import series_volume_name
from ...cases import GroundTruth, VolumeRef
from ...kit.loading import SkipCase, column, find_one, localization_record, read_csv_rows, volume_case
from ...package import PackageWriter, place_file
from ...synthetic.common import write_nifti
from .labels import NSCLC_QUESTIONS

LOCATIONS = {"RUL": "A", "RML": "B", "RLL": "C", "LUL": "D", "LLL": "E", "L Lingula": "F", "Lingula": "F"}


def t_stage_option(value: str) -> str | None:
    text = value.strip().upper()
    if text.startswith(("T1", "T2", "T3", "T4")):
        return "ABCD"[int(text[1]) - 1]
    return "E" if text in ("NOT COLLECTED", "NA", "") else None


def n_stage_option(value: str) -> str | None:
    text = value.strip().upper()
    return {"N0": "A", "N1": "B", "N2": "C"}.get(text, "D" if text in ("NOT COLLECTED", "NA", "") else None)


def histology_option(value: str) -> str | None:
    text = value.strip().lower()
    if not text:
        return None
    if "adenocarcinoma" in text:
        return "A"
    if "squamous" in text:
        return "B"
    if "small cell" in text and "non" not in text:
        return "C"
    return "D"


def grade_option(value: str) -> str | None:
    text = value.strip().lower()
    if "type ii" in text:
        return "E"
    if "type i" in text:
        return "D"
    for prefix, letter in (("g1", "A"), ("g2", "B"), ("g3", "C")):
        if text.startswith(prefix):
            return letter
    return None


NOT_SCORED = {  # clinical values outside MedFlow-Bench's label set (App. H.1): the case stays, the question is unscored
    "q2": ("TIS",),  # carcinoma in situ: the T options are T1-T4, not available, no tumour
    "q5": ("NOT COLLECTED", "NA", ""),  # the grade options have no "not collected"
}


CLINICAL_STEP = "clinical row"
SEG_STEP = "DICOM SEG tumour mask on its CT"
SERIES_STEP = "PET and CT series"


def tumour_location(row: dict) -> tuple[str | None, str]:
    """(answer letter or None, the clinical value): exactly one lobe ticked is that lobe; "Unknown", two lobes
    (a tumour across a fissure) or no tick has no option among MedFlow-Bench's six lobes."""
    checked = [name for name in (*LOCATIONS, "Unknown")
               if (column(row, f"choice={name})") or "").strip().lower() == "checked"]
    if len(checked) == 1 and checked[0] in LOCATIONS:
        return LOCATIONS[checked[0]], checked[0]
    return None, " + ".join(checked) if checked else "no location ticked"


def clinical_answers(row: dict) -> dict[str, str | None]:
    """The five answer letters of one clinical CSV row. A value MedFlow-Bench's label set has no option for keeps
    the case (MedFlow-Bench's 162 are all R01 cases) with that question unscored (None); any other value without an
    option skips the case."""
    mapped = {
        "q1": tumour_location(row)[0],
        "q2": t_stage_option(column(row, "pathological t stage") or ""),
        "q3": n_stage_option(column(row, "pathological n stage") or ""),
        "q4": histology_option(column(row, "histology") or ""),
        "q5": grade_option(column(row, "histopathological grade") or ""),
    }
    raw = clinical_values(row)
    for qid, letter in mapped.items():
        if letter is None and qid != "q1" and raw[qid].strip().upper() not in NOT_SCORED.get(qid, ()):
            raise SkipCase(f"{qid}: clinical value {raw[qid]!r} has no answer option", CLINICAL_STEP)
    return mapped


def clinical_values(row: dict) -> dict[str, str]:
    """The clinical CSV's own value behind each question."""
    return {"q1": tumour_location(row)[1], "q2": column(row, "pathological t stage") or "",
            "q3": column(row, "pathological n stage") or "", "q4": column(row, "histology") or "",
            "q5": column(row, "histopathological grade") or ""}


def answer_labels(answers: dict[str, str | None], row: dict) -> dict[str, str]:
    """Human-readable label per question; an unscored one names its clinical value."""
    raw = clinical_values(row)
    return {qid: dict(options)[answers[qid]] if answers[qid] is not None else f"{raw[qid] or 'blank'} (not in "
            "the paper's label set: not scored)" for qid, _, options in NSCLC_QUESTIONS}


def ct_geometry(split: SeriesSplit) -> tuple[list[str], np.ndarray]:
    """(SOP Instance UIDs in slice order, 4x4 voxel->RAS affine for arrays indexed [col, row, slice]) of the CT
    ``split`` (:func:`series_split`): the geometry the viewer gives the series (``viewer.dicom_series``), so the
    mask lies where the agent sees the CT. A CT the viewer would split or resample has no single grid for the SEG:
    that case is skipped with the reason."""
    import pydicom

    problems = split.refused + [warning for plan in split.plans for warning in plan.warnings]
    if len(split.plans) != 1 or problems or split.plans[0].resample_to is not None:
        raise SkipCase("the SEG's CT is not one evenly spaced volume: " + "; ".join(problems + split.warnings),
                       SEG_STEP)
    plan = split.plans[0]
    # the one tag the SEG's frames are matched by: a whole header per slice was most of a case's preparation
    uids = [str(pydicom.dcmread(path, stop_before_pixels=True, specific_tags=["SOPInstanceUID"]).SOPInstanceUID)
            for path in plan.files]
    return uids, plan.ijk_to_ras()


def seg_mask_on_ct(seg_path: Path, ct_split: SeriesSplit) -> tuple[np.ndarray, np.ndarray]:
    """The SEG's first segment as a [col, row, slice] uint8 array on the grid of the referenced CT (its
    :func:`series_split`), with its RAS affine."""
    import highdicom as hd

    uids, affine = ct_geometry(ct_split)
    seg = hd.seg.segread(seg_path)
    pixels = seg.get_pixels_by_source_instance(
        source_sop_instance_uids=uids,
        segment_numbers=[1],
        combine_segments=True,
        assert_missing_frames_are_empty=True,
    )
    # a transposed view, so Fortran-ordered: the NIfTI writer stores that order as it is (a C-ordered copy was
    # transposed twice)
    return np.transpose(pixels > 0, (2, 1, 0)).astype(np.uint8), affine


def series_split(files: list[Path], splits: dict[Path, SeriesSplit]) -> SeriesSplit:
    """:func:`split_series` of one series folder's ``files``, read once per case into ``splits`` (the SEG's CT is
    placed on its grid, then resolved with the other series: its headers were read twice)."""
    folder = files[0].parent
    if folder not in splits:
        splits[folder] = split_series([str(path) for path in files], folder.name)
    return splits[folder]


def prepare_nsclc(source: Path, writer: PackageWriter, include_amc: bool = False) -> None:
    metadata_path = find_one(source, "metadata.csv", "NBIA metadata.csv")
    clinical = {
        row.get("Case ID", ""): row
        for row in read_csv_rows(find_one(source, "NSCLCR01Radiogenomic_DATA_LABELS*.csv", "clinical CSV"))
    }
    series_by_subject: dict[str, list[dict]] = {}
    for row in read_csv_rows(metadata_path):
        location = row.get("File Location", "").replace("\\", "/").removeprefix("./")
        row["path"] = metadata_path.parent / location
        series_by_subject.setdefault(row.get("Subject ID", ""), []).append(row)
    for case_id in sorted(set(series_by_subject) | set(clinical)):
        if not writer.admit(case_id):
            continue
        if case_id.upper().startswith("AMC") and not include_amc:
            writer.skip(case_id, "AMC case excluded by default (use --include-amc)", "exclude AMC (default)")
            continue
        try:
            _prepare_case(case_id, clinical.get(case_id), series_by_subject.get(case_id, []), writer)
        except SkipCase as reason:
            writer.skip(case_id, reason)


def _series_files(item: dict) -> list[Path]:
    files = sorted(item["path"].glob("*.dcm"))
    if not files:
        raise SkipCase(f"series folder {item['path']} has no .dcm files", SERIES_STEP)
    return files


def _referenced_series(seg_files: list[Path]) -> str:
    import pydicom

    try:
        header = pydicom.dcmread(seg_files[0], stop_before_pixels=True)
        return str(header.ReferencedSeriesSequence[0].SeriesInstanceUID)
    except Exception as error:  # pydicom raises many types for broken files
        raise SkipCase(f"unreadable SEG: {error}", SEG_STEP) from error


def study_date(item: dict) -> str:
    """metadata.csv's Study Date (NBIA writes MM-DD-YYYY) as YYYY-MM-DD, so studies sort chronologically."""
    from datetime import datetime

    text = item.get("Study Date", "")
    for layout in ("%m-%d-%Y", "%Y-%m-%d", "%Y%m%d"):
        try:
            return datetime.strptime(text, layout).date().isoformat()
        except ValueError:
            continue
    return text


def viewer_series(items: list[dict], splits: dict[Path, SeriesSplit]) -> list[tuple[str, dict, list[Path]]]:
    """(volume name, metadata row, files) of every series the viewer resolves to one volume, named as the
    viewer names them (:func:`viewer.loading.unique_names`: the description, then ``_2``, ``_3`` in the order
    it discovers the folders, which are named after the volumes so that order is this one); ``splits`` as
    :func:`series_split` keeps them."""
    import pydicom

    resolved, taken = [], set()
    for item in items:
        files = _series_files(item)
        split = series_split(files, splits)
        if len(split.plans) != 1 or split.refused:
            continue  # the viewer would refuse or split it: not one resolved series
        header = pydicom.dcmread(files[0], stop_before_pixels=True, specific_tags=["SeriesDescription"])
        base = series_volume_name(str(getattr(header, "SeriesDescription", "") or "")) or item.get("Modality", "")
        name, number = base, 1
        while name in taken:
            number += 1
            name = f"{base}_{number}"
        if number > 9:  # folder "X_10" sorts before "X_2": the viewer would number them differently
            raise SkipCase(f"more than nine series named {base!r}", SERIES_STEP)
        taken.add(name)
        resolved.append((name, item, files))
    return resolved


def _prepare_case(case_id: str, row: dict | None, series: list[dict], writer: PackageWriter) -> None:
    if row is None:
        raise SkipCase("no row in the clinical CSV", CLINICAL_STEP)
    answers = clinical_answers(row)
    by_modality: dict[str, list[dict]] = {}
    for item in series:
        by_modality.setdefault(item.get("Modality", ""), []).append(item)
    if not by_modality.get("SEG"):
        raise SkipCase("no DICOM SEG tumour mask", SEG_STEP)
    if not by_modality.get("PT"):
        raise SkipCase("no PET series", SERIES_STEP)
    seg_files = sorted(by_modality["SEG"][0]["path"].glob("*.dcm"))
    if not seg_files:
        raise SkipCase(f"SEG folder {by_modality['SEG'][0]['path']} has no .dcm file", SEG_STEP)
    referenced = _referenced_series(seg_files)
    source_ct = next((item for item in by_modality.get("CT", []) if item.get("Series UID") == referenced), None)
    if source_ct is None:
        raise SkipCase("the CT series the SEG references is not in the download", SEG_STEP)
    splits: dict[Path, SeriesSplit] = {}
    try:
        mask, affine = seg_mask_on_ct(seg_files[0], series_split(_series_files(source_ct), splits))
    except SkipCase:
        raise
    except Exception as error:
        raise SkipCase(f"cannot place the SEG on its CT: {error}", SEG_STEP) from error
    # every CT and PET of every study: the source CT's study first, then the others by date
    imaging = sorted((item for item in series if item.get("Modality") in ("CT", "PT")),
                     key=lambda item: (item.get("Study UID") != source_ct.get("Study UID"), study_date(item),
                                       item is not source_ct, item["path"].name))
    resolved = viewer_series(imaging, splits)
    if not any(item is source_ct for _, item, _ in resolved):
        raise SkipCase("the SEG's CT does not load as one volume", SEG_STEP)
    if not any(item.get("Modality") == "PT" for _, item, _ in resolved):
        raise SkipCase("no PET series loads as one volume", SERIES_STEP)
    data_dir = writer.data_dir(case_id)
    volumes = []
    for name, item, files in resolved:
        for path in files:
            place_file(path, data_dir / name / path.name)
        role = "diagnostic_ct" if item is source_ct else "pet" if item["Modality"] == "PT" else "ct"
        volumes.append(VolumeRef(name, writer.relative(data_dir / name), item["Modality"], role))
    volumes.sort(key=lambda volume: volume.role != "diagnostic_ct")  # the evidence's source series first
    mask_path = write_nifti(writer.hidden_dir(case_id) / "mask.nii.gz", mask, affine)
    place_file(seg_files[0], writer.hidden_dir(case_id) / "segmentation.dcm")
    localization = localization_record(mask_path, volumes[0].name)
    if localization is None:
        raise SkipCase("DICOM SEG tumour mask is empty", SEG_STEP)
    case = volume_case(case_id, writer, volumes, {
        "default_alias": "diagnostic_ct",
        "source_volume_name": volumes[0].name,
        "source_modality": "CT",
        "series": {volume.name: volume.modality for volume in volumes},
    })
    labels = answer_labels(answers, row)
    if writer.add(case, GroundTruth("nsclc", case_id, answers, labels, localization=localization)):
        counts = writer.notes.setdefault("label_counts", {})
        for qid, label in labels.items():
            counts.setdefault(qid, {})[label] = counts.get(qid, {}).get(label, 0) + 1

"""NSCLC Radiogenomics: NBIA download tree + ``metadata.csv`` + clinical CSV -> nsclc case packages.

Series are found through metadata.csv's "File Location" (Windows ``.\\`` paths, relative to the manifest
folder). The tumour mask is the DICOM SEG (read with highdicom) resampled onto nothing: it is defined on
the CT it
references, and is written as NIfTI with that CT's geometry converted from DICOM LPS to RAS. Clinical labels
("Histology " with a trailing space, T/N stage, grade, the six "Tumor Location (choice=...)" columns) map to
the five questions of App. H.1; AMC cases are excluded unless ``include_amc``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...viewer.dicom_series import split_series
from ...viewer.loading import series_volume_name
from ..cases import Case, GroundTruth, PackageWriter, VolumeRef, place_file
from ..labels import NSCLC_QUESTIONS
from ..synthetic.common import write_nifti
from .common import SkipCase, column, find_one, localization_record, questions_for, read_csv_rows

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


NOT_SCORED = {  # clinical values outside the paper's label set (App. H.1): the case stays, the question is unscored
    "q2": ("TIS",),  # carcinoma in situ: the T options are T1-T4, not available, no tumour
    "q5": ("NOT COLLECTED", "NA", ""),  # the grade options have no "not collected"
}


def clinical_answers(row: dict) -> dict[str, str | None]:
    """The five answer letters of one clinical CSV row. A value the paper's label set has no option for keeps
    the case (the paper's 162 are all R01 cases) with that question unscored (None); any other value without an
    option skips the case."""
    checked = [name for name in LOCATIONS if (column(row, f"choice={name})") or "").lower() == "checked"]
    if len(checked) != 1:
        raise SkipCase(f"tumour location must be exactly one lobe, CSV has {checked or 'none'}")
    mapped = {
        "q1": LOCATIONS[checked[0]],
        "q2": t_stage_option(column(row, "pathological t stage") or ""),
        "q3": n_stage_option(column(row, "pathological n stage") or ""),
        "q4": histology_option(column(row, "histology") or ""),
        "q5": grade_option(column(row, "histopathological grade") or ""),
    }
    raw = {"q2": column(row, "pathological t stage") or "", "q5": column(row, "histopathological grade") or ""}
    for qid, letter in mapped.items():
        if letter is None and raw.get(qid, "-").strip().upper() not in NOT_SCORED.get(qid, ()):
            raise SkipCase(f"{qid}: clinical value has no answer option")
    return mapped


def answer_labels(answers: dict[str, str | None], row: dict) -> dict[str, str]:
    """Human-readable label per question; an unscored one names its clinical value."""
    raw = {"q2": column(row, "pathological t stage"), "q5": column(row, "histopathological grade")}
    return {qid: dict(options)[answers[qid]] if answers[qid] is not None else f"{raw[qid] or 'blank'} (not in "
            "the paper's label set: not scored)" for qid, _, options in NSCLC_QUESTIONS}


def ct_geometry(files: list[Path]):
    """(datasets in slice order, 4x4 voxel->RAS affine for arrays indexed [col, row, slice]): the geometry the
    viewer gives the series (``viewer.dicom_series``), so the mask lies where the agent sees the CT. A CT the
    viewer would split or resample has no single grid for the SEG: that case is skipped with the reason."""
    import pydicom

    split = split_series([str(path) for path in files], files[0].parent.name if files else "CT")
    problems = split.refused + [warning for plan in split.plans for warning in plan.warnings]
    if len(split.plans) != 1 or problems or split.plans[0].resample_to is not None:
        raise SkipCase("the SEG's CT is not one evenly spaced volume: " + "; ".join(problems + split.warnings))
    plan = split.plans[0]
    datasets = [pydicom.dcmread(path, stop_before_pixels=True) for path in plan.files]
    return datasets, plan.ijk_to_ras()


def seg_mask_on_ct(seg_path: Path, ct_files: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    """The SEG's first segment as a [col, row, slice] uint8 array on the referenced CT grid, with its RAS
    affine."""
    import highdicom as hd

    datasets, affine = ct_geometry(ct_files)
    seg = hd.seg.segread(seg_path)
    uids = [str(ds.SOPInstanceUID) for ds in datasets]
    pixels = seg.get_pixels_by_source_instance(
        source_sop_instance_uids=uids,
        segment_numbers=[1],
        combine_segments=True,
        assert_missing_frames_are_empty=True,
    )
    return np.ascontiguousarray(np.transpose(pixels > 0, (2, 1, 0)).astype(np.uint8)), affine


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
        if case_id.upper().startswith("AMC") and not include_amc:
            writer.skip(case_id, "AMC case excluded by default (use --include-amc)", "exclude AMC (default)")
            continue
        try:
            _prepare_case(case_id, clinical.get(case_id), series_by_subject.get(case_id, []), writer)
        except SkipCase as reason:
            writer.skip(case_id, reason)


def _prepare_case(case_id: str, row: dict | None, series: list[dict], writer: PackageWriter) -> None:
    import pydicom

    if row is None:
        raise SkipCase("no row in the clinical CSV")
    answers = clinical_answers(row)
    by_modality: dict[str, list[dict]] = {}
    for item in series:
        by_modality.setdefault(item.get("Modality", ""), []).append(item)
    if not by_modality.get("SEG"):
        raise SkipCase("no DICOM SEG tumour mask")
    if not by_modality.get("PT"):
        raise SkipCase("no PET series")
    seg_files = sorted(by_modality["SEG"][0]["path"].glob("*.dcm"))
    if not seg_files:
        raise SkipCase(f"SEG folder {by_modality['SEG'][0]['path']} has no .dcm file")
    try:
        seg_header = pydicom.dcmread(seg_files[0], stop_before_pixels=True)
        referenced = str(seg_header.ReferencedSeriesSequence[0].SeriesInstanceUID)
    except Exception as error:  # pydicom raises many types for broken files
        raise SkipCase(f"unreadable SEG: {error}") from error
    cts = [item for item in by_modality.get("CT", []) if item.get("Series UID") == referenced]
    if not cts:
        raise SkipCase("the CT series the SEG references is not in the download")
    chosen = [("CT", cts[0]), ("PT", by_modality["PT"][0])]
    data_dir = writer.data_dir(case_id)
    volumes, names = [], set()
    for modality, item in chosen:
        files = sorted(item["path"].glob("*.dcm"))
        if not files:
            raise SkipCase(f"series folder {item['path']} has no .dcm files")
        # the name the viewer will show: from the series' own DICOM header, as the viewer reads it
        header = pydicom.dcmread(files[0], stop_before_pixels=True)
        name = series_volume_name(str(getattr(header, "SeriesDescription", "") or "")) or modality
        if name in names:
            name = f"{name}_{modality}"
        names.add(name)
        for path in files:
            place_file(path, data_dir / name / path.name)
        volumes.append(
            VolumeRef(name, writer.relative(data_dir / name), modality, "diagnostic_ct" if modality == "CT" else "pet")
        )
    try:
        mask, affine = seg_mask_on_ct(seg_files[0], sorted(cts[0]["path"].glob("*.dcm")))
    except SkipCase:
        raise
    except Exception as error:
        raise SkipCase(f"cannot place the SEG on its CT: {error}") from error
    mask_path = write_nifti(writer.hidden_dir(case_id) / "mask.nii.gz", mask, affine)
    place_file(seg_files[0], writer.hidden_dir(case_id) / "segmentation.dcm")
    localization = localization_record(mask_path, volumes[0].name)
    if localization is None:
        raise SkipCase("DICOM SEG tumour mask is empty")
    case = Case(
        module="nsclc",
        case_id=case_id,
        data_dir=writer.relative(data_dir),
        open_paths=[writer.relative(data_dir)],
        volumes=volumes,
        questions=questions_for("nsclc"),
        brief={
            "default_alias": "diagnostic_ct",
            "source_volume_name": volumes[0].name,
            "source_modality": "CT",
            "series": {volume.name: volume.modality for volume in volumes},
        },
    )
    labels = answer_labels(answers, row)
    writer.add(case, GroundTruth("nsclc", case_id, answers, labels, localization=localization))
    counts = writer.notes.setdefault("label_counts", {})
    for qid, label in labels.items():
        counts.setdefault(qid, {})[label] = counts.get(qid, {}).get(label, 0) + 1

"""NSCLC-Radiogenomics: five staging and histology questions from PET/CT, with lesion evidence on the CT
(MedFlow-Bench App. H.1, Table 4)."""

from __future__ import annotations

from pathlib import Path

from ....apps import inspect_tools
from ....core.applications import RADIOLOGY
from ....trace_audit.specs import AuditSpec, single_study
from ...cases import CONSISTENT_STEP, USABLE_STEP, Question
from ...prompts import compact_numbered_options
from ...scoring.process import RADIOLOGY_LOCALIZE
from ...spec import LOC_RAS_IN_MASK, ModuleSpec, SubMetric, imported_on_call
from ...truth_check import localization_problems
from . import PREPARE_OPTIONS, plans
from .answer import parse, score_answer, write
from .labels import NSCLC_QUESTIONS

SUBTASK_LABELS = ("Tumor Loc.", "T Stage", "Path. N", "Hist.", "Grade")  # MedFlow-Bench Table 5


def answered(parsed: dict) -> bool:
    """Any of the five questions answered."""
    return any(value is not None for value in (parsed.get("answers") or {}).values())


PROMPTS = Path(__file__).resolve().parent / "prompts"  # this module's App. H templates

SPEC = ModuleSpec(
    name="nsclc",
    title="Lung PET/CT",
    application=RADIOLOGY,
    loader=imported_on_call("MedOpenClawLib.bench.modules.nsclc.loader", "prepare_nsclc"),
    loader_options=tuple(PREPARE_OPTIONS),
    filter_steps=("exclude AMC (default)", "clinical row", "DICOM SEG tumour mask on its CT", "PET and CT series",
                  USABLE_STEP, CONSISTENT_STEP),
    paper_count=162,  # without the AMC cohort
    dataset_dir="NSCLC-Radiogenomics",
    write_synthetic=imported_on_call("MedOpenClawLib.bench.modules.nsclc.synthetic", "write_synthetic"),
    truth_checks=(localization_problems,),
    questions=tuple(Question(qid, text, options) for qid, text, options in NSCLC_QUESTIONS),
    no_lesion_answer="No tumor",
    system_prompt=PROMPTS / "system.txt",
    task_prompt=PROMPTS / "task.txt",
    format_options=compact_numbered_options,
    parse=parse,
    answered=answered,
    write_answer=write,
    tables=("table1", "table5"),
    operations={"segmentation": "atlas", "vista3d": "atlas"},
    score=score_answer,
    localization=LOC_RAS_IN_MASK,
    sub_metrics=tuple(SubMetric(qid, label, "questions")
                      for (qid, _, _), label in zip(NSCLC_QUESTIONS, SUBTASK_LABELS)),
    detail_columns=("task", *(qid for qid, _, _ in NSCLC_QUESTIONS), "strict", "loc"),
    reference_tools=("observe", "select_volume", "window_preset", "scroll", "set_slice_offset", "image_coords_to_ras"),
    stages=(
        ("inspect", inspect_tools(RADIOLOGY)),
        ("select_source_series", frozenset({"select_volume"})),
        ("localize", RADIOLOGY_LOCALIZE),
    ),
    audit=AuditSpec("radiology", single_study, "vista3d"),
    plans={"oracle": plans.oracle, "heuristic": plans.heuristic, "random": plans.random},
)

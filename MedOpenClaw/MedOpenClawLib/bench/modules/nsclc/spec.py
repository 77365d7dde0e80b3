"""NSCLC-Radiogenomics: five staging and histology questions from PET/CT, with lesion evidence on the CT
(MedFlow-Bench App. H.1, Table 4)."""

from __future__ import annotations

from ...trace_audit.specs import AuditSpec, single_study
from ..agents.answers import write_nsclc
from ..agents.heuristic import HeuristicAgent
from ..agents.oracle import OracleAgent
from ..agents.random_agent import RandomAgent
from ..cases import CONSISTENT_STEP, USABLE_STEP, Question
from ..labels import NSCLC_QUESTIONS
from ..parsers import parse_nsclc
from ..prompts import compact_numbered_options
from ..scoring.process import INSPECT_TOOLS, RADIOLOGY_LOCALIZE
from ..scoring.rules import score_nsclc
from ..truth_check import localization_problems
from .spec import LOC_RAS_IN_MASK, RADIOLOGY, ModuleSpec, SubMetric, imported_on_call

SUBTASK_LABELS = ("Tumor Loc.", "T Stage", "Path. N", "Hist.", "Grade")  # MedFlow-Bench Table 5


def write_synthetic(root, config) -> list[str]:
    from ..synthetic.thorax import write_nsclc

    return write_nsclc(root, config.seed, config.cases, config.ct_size, config.workers)


def answered(parsed: dict) -> bool:
    """Any of the five questions answered."""
    return any(value is not None for value in (parsed.get("answers") or {}).values())


SPEC = ModuleSpec(
    name="nsclc",
    title="Lung PET/CT",
    application=RADIOLOGY,
    loader=imported_on_call("MedOpenClawLib.bench.loaders.nsclc", "prepare_nsclc"),
    loader_options=("include_amc",),
    filter_steps=("exclude AMC (default)", "clinical row", "DICOM SEG tumour mask on its CT", "PET and CT series",
                  USABLE_STEP, CONSISTENT_STEP),
    paper_count=162,  # without the AMC cohort
    dataset_dir="NSCLC-Radiogenomics",
    write_synthetic=write_synthetic,
    truth_checks=(localization_problems,),
    questions=tuple(Question(qid, text, options) for qid, text, options in NSCLC_QUESTIONS),
    system_prompt="nsclc.system.txt",
    task_prompt="nsclc.task.txt",
    format_options=compact_numbered_options,
    parse=parse_nsclc,
    answered=answered,
    write_answer=write_nsclc,
    score=score_nsclc,
    localization=LOC_RAS_IN_MASK,
    sub_metrics=tuple(SubMetric(qid, label, "questions")
                      for (qid, _, _), label in zip(NSCLC_QUESTIONS, SUBTASK_LABELS)),
    detail_columns=("task", *(qid for qid, _, _ in NSCLC_QUESTIONS), "strict", "loc"),
    reference_tools=("observe", "select_volume", "window_preset", "scroll", "set_slice_offset", "image_coords_to_ras"),
    stages=(
        ("inspect", INSPECT_TOOLS),
        ("select_source_series", frozenset({"select_volume"})),
        ("localize", RADIOLOGY_LOCALIZE),
    ),
    audit=AuditSpec("radiology", single_study, "vista3d"),
    plans={"oracle": OracleAgent.localized_plan, "heuristic": HeuristicAgent.nsclc_plan,
           "random": RandomAgent.nsclc_plan},
)

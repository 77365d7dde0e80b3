"""BRACS: the slide-level breast-lesion label of an H&E whole-slide image, with a coordinate inside an ROI of
that label (MedFlow-Bench App. H.2, Table 4)."""

from __future__ import annotations

from pathlib import Path

from ....core.applications import PATHOLOGY
from ....trace_audit.specs import AuditSpec, single_study
from ...cases import Question
from ...prompts import PROMPT_DIR as SHARED_PROMPTS
from ...prompts import dotted_options
from ...scoring.process import PATHOLOGY_REFERENCE, PATHOLOGY_STAGES
from ...spec import LOC_WSI_POINT, ModuleSpec, imported_on_call, single_answer
from ...truth_check import region_problems, slide_size_problems
from . import plans
from .answer import parse, score_answer, write
from .labels import BRACS_OPTIONS

PROMPTS = Path(__file__).resolve().parent / "prompts"  # this module's App. H templates

SPEC = ModuleSpec(
    name="bracs",
    title="Breast WSI",
    application=PATHOLOGY,
    loader=imported_on_call("MedOpenClawLib.bench.modules.bracs.loader", "prepare_bracs"),
    loader_options=(),
    filter_steps=(),
    paper_count=113,
    dataset_dir="BRACS",
    write_synthetic=imported_on_call("MedOpenClawLib.bench.modules.bracs.synthetic", "write_synthetic"),
    truth_checks=(region_problems, slide_size_problems),
    questions=(Question("answer", "Single best slide-level BRACS label", BRACS_OPTIONS),),
    no_lesion_answer=None,
    system_prompt=SHARED_PROMPTS / "pathology.system.txt",
    task_prompt=PROMPTS / "task.txt",
    format_options=dotted_options,
    parse=parse,
    answered=single_answer,
    write_answer=write,
    tables=("table2",),
    operations={},
    score=score_answer,
    localization=LOC_WSI_POINT,
    sub_metrics=(),
    detail_columns=("task", "strict", "loc"),
    reference_tools=PATHOLOGY_REFERENCE,
    stages=PATHOLOGY_STAGES,
    audit=AuditSpec("pathology", single_study),
    plans={"oracle": plans.oracle, "heuristic": plans.heuristic, "random": plans.random},
)

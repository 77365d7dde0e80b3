"""BRACS: the slide-level breast-lesion label of an H&E whole-slide image, with a coordinate inside an ROI of
that label (MedFlow-Bench App. H.2, Table 4)."""

from __future__ import annotations

from ...trace_audit.specs import AuditSpec, single_study
from ..agents.answers import write_bracs
from ..agents.heuristic import HeuristicAgent
from ..agents.oracle import OracleAgent
from ..agents.random_agent import RandomAgent
from ..cases import Question
from ..labels import BRACS_OPTIONS
from ..parsers import parse_bracs
from ..prompts import dotted_options
from ..scoring.process import PATHOLOGY_REFERENCE, PATHOLOGY_STAGES
from ..scoring.rules import score_bracs
from ..truth_check import region_problems, slide_size_problems
from .spec import LOC_WSI_POINT, PATHOLOGY, ModuleSpec, imported_on_call, single_answer


def write_synthetic(root, config) -> list[str]:
    from ..synthetic.slides import write_bracs

    return write_bracs(root, config.seed, config.cases, tuple(config.slide_size), config.workers)


SPEC = ModuleSpec(
    name="bracs",
    title="Breast WSI",
    application=PATHOLOGY,
    loader=imported_on_call("MedOpenClawLib.bench.loaders.pathology", "prepare_bracs"),
    loader_options=(),
    filter_steps=(),
    paper_count=113,
    dataset_dir="BRACS",
    write_synthetic=write_synthetic,
    truth_checks=(region_problems, slide_size_problems),
    questions=(Question("answer", "Single best slide-level BRACS label", BRACS_OPTIONS),),
    system_prompt="pathology.system.txt",
    task_prompt="bracs.task.txt",
    format_options=dotted_options,
    parse=parse_bracs,
    answered=single_answer,
    write_answer=write_bracs,
    score=score_bracs,
    localization=LOC_WSI_POINT,
    sub_metrics=(),
    detail_columns=("task", "strict", "loc"),
    reference_tools=PATHOLOGY_REFERENCE,
    stages=PATHOLOGY_STAGES,
    audit=AuditSpec("pathology", single_study),
    plans={"oracle": OracleAgent.bracs_plan, "heuristic": HeuristicAgent.bracs_plan, "random": RandomAgent.bracs_plan},
)

"""CAMELYON17: tumour presence and the largest metastasis category of a lymph-node whole-slide image, with a
coordinate inside a tumour region (MedFlow-Bench App. H.2, Table 4)."""

from __future__ import annotations

from ...trace_audit.specs import AuditSpec, single_study
from ..agents.answers import write_camelyon
from ..agents.heuristic import HeuristicAgent
from ..agents.oracle import OracleAgent
from ..agents.random_agent import RandomAgent
from ..cases import Question
from ..labels import METASTASIS_OPTIONS, TUMOR_PRESENCE_OPTIONS
from ..parsers import parse_camelyon
from ..prompts import numbered_questions
from ..scoring.process import PATHOLOGY_REFERENCE, PATHOLOGY_STAGES
from ..scoring.rules import score_camelyon
from ..truth_check import camelyon_problems, region_problems, slide_size_problems
from .spec import LOC_WSI_POINT, PATHOLOGY, ModuleSpec, SubMetric, imported_on_call


def write_synthetic(root, config) -> list[str]:
    from ..synthetic.slides import write_camelyon

    return write_camelyon(root, config.seed, config.cases, tuple(config.slide_size), config.workers)


def answered(parsed: dict) -> bool:
    """The presence question answered (the category follows from it on a negative slide)."""
    return parsed.get("tumor_presence") is not None


SPEC = ModuleSpec(
    name="camelyon17",
    title="Lymph-node WSI",
    application=PATHOLOGY,
    loader=imported_on_call("MedOpenClawLib.bench.loaders.pathology", "prepare_camelyon"),
    loader_options=(),
    filter_steps=(),
    paper_count=550,
    dataset_dir="CAMELYON17",
    write_synthetic=write_synthetic,
    truth_checks=(region_problems, camelyon_problems, slide_size_problems),
    questions=(
        Question("tumor_presence", "Tumor presence?", TUMOR_PRESENCE_OPTIONS),
        Question("largest_metastasis", "Largest metastasis category for this slide?", METASTASIS_OPTIONS),
    ),
    system_prompt="pathology.system.txt",
    task_prompt="camelyon17.task.txt",
    format_options=numbered_questions,
    parse=parse_camelyon,
    answered=answered,
    write_answer=write_camelyon,
    score=score_camelyon,
    localization=LOC_WSI_POINT,
    sub_metrics=(SubMetric("tumor_presence", "Presence", ""), SubMetric("largest_metastasis", "Category", "")),
    detail_columns=("task", "tumor_presence", "largest_metastasis", "strict", "loc"),
    reference_tools=PATHOLOGY_REFERENCE,
    stages=PATHOLOGY_STAGES,
    audit=AuditSpec("pathology", single_study),
    plans={"oracle": OracleAgent.camelyon_plan, "heuristic": HeuristicAgent.camelyon_plan,
           "random": RandomAgent.camelyon_plan},
)

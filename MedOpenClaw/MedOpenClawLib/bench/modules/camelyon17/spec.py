"""CAMELYON17: tumour presence and the largest metastasis category of a lymph-node whole-slide image, with a
coordinate inside a tumour region (MedFlow-Bench App. H.2, Table 4)."""

from __future__ import annotations

from pathlib import Path

from ....core.applications import PATHOLOGY
from ....trace_audit.specs import AuditSpec, single_study
from ...cases import Question
from ...prompts import PROMPT_DIR as SHARED_PROMPTS
from ...prompts import numbered_questions
from ...scoring.process import PATHOLOGY_REFERENCE, PATHOLOGY_STAGES
from ...spec import LOC_WSI_POINT, ModuleSpec, SubMetric, imported_on_call
from ...truth_check import region_problems, slide_size_problems
from . import plans
from .answer import parse, score_answer, write
from .labels import METASTASIS_OPTIONS, TUMOR_PRESENCE_OPTIONS
from .truth import camelyon_problems


def answered(parsed: dict) -> bool:
    """The presence question answered (the category follows from it on a negative slide)."""
    return parsed.get("tumor_presence") is not None


PROMPTS = Path(__file__).resolve().parent / "prompts"  # this module's App. H templates

SPEC = ModuleSpec(
    name="camelyon17",
    title="Lymph-node WSI",
    application=PATHOLOGY,
    loader=imported_on_call("MedOpenClawLib.bench.modules.camelyon17.loader", "prepare_camelyon"),
    loader_options=(),
    filter_steps=(),
    paper_count=550,
    dataset_dir="CAMELYON17",
    write_synthetic=imported_on_call("MedOpenClawLib.bench.modules.camelyon17.synthetic", "write_synthetic"),
    truth_checks=(region_problems, camelyon_problems, slide_size_problems),
    questions=(
        Question("tumor_presence", "Tumor presence?", TUMOR_PRESENCE_OPTIONS),
        Question("largest_metastasis", "Largest metastasis category for this slide?", METASTASIS_OPTIONS),
    ),
    no_lesion_answer=None,
    system_prompt=SHARED_PROMPTS / "pathology.system.txt",
    task_prompt=PROMPTS / "task.txt",
    format_options=numbered_questions,
    parse=parse,
    answered=answered,
    write_answer=write,
    tables=("table2",),
    operations={},
    score=score_answer,
    localization=LOC_WSI_POINT,
    sub_metrics=(SubMetric("tumor_presence", "Presence", ""), SubMetric("largest_metastasis", "Category", "")),
    detail_columns=("task", "tumor_presence", "largest_metastasis", "strict", "loc"),
    reference_tools=PATHOLOGY_REFERENCE,
    stages=PATHOLOGY_STAGES,
    audit=AuditSpec("pathology", single_study),
    plans={"oracle": plans.oracle, "heuristic": plans.heuristic, "random": plans.random},
)

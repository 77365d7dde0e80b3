"""UCSF-PDGM: brain-tumour classification from four MRI sequences, with lesion evidence (MedFlow-Bench
App. H.1, Table 4)."""

from __future__ import annotations

from ...trace_audit.specs import AuditSpec, single_study
from ..agents.answers import write_ucsf
from ..agents.heuristic import HeuristicAgent
from ..agents.oracle import OracleAgent
from ..agents.random_agent import RandomAgent
from ..cases import USABLE_STEP, Question
from ..labels import UCSF_OPTIONS
from ..parsers import parse_ucsf
from ..prompts import lettered_options
from ..scoring.process import INSPECT_TOOLS, RADIOLOGY_LOCALIZE, RADIOLOGY_REFERENCE
from ..scoring.rules import score_ucsf
from ..truth_check import localization_problems
from .spec import LOC_RAS_IN_MASK, RADIOLOGY, ModuleSpec, imported_on_call, single_answer


def write_synthetic(root, config) -> list[str]:
    from ..synthetic.brain_datasets import write_ucsf

    return write_ucsf(root, config.seed, config.cases, config.mri_spacing_mm, config.workers)


SPEC = ModuleSpec(
    name="ucsf-pdgm",
    title="Brain MRI",
    application=RADIOLOGY,
    loader=imported_on_call("MedOpenClawLib.bench.loaders.ucsf_pdgm", "prepare_ucsf"),
    loader_options=(),
    filter_steps=("baseline scans only (_FU follow-ups excluded)", USABLE_STEP),
    paper_count=495,
    dataset_dir="UCSF-PDGM",
    write_synthetic=write_synthetic,
    truth_checks=(localization_problems,),
    questions=(Question("answer", "Classify the case into one option", UCSF_OPTIONS),),
    system_prompt="ucsf-pdgm.system.txt",
    task_prompt="ucsf-pdgm.task.txt",
    format_options=lettered_options,
    parse=parse_ucsf,
    answered=single_answer,
    write_answer=write_ucsf,
    score=score_ucsf,
    localization=LOC_RAS_IN_MASK,
    sub_metrics=(),
    detail_columns=("task", "strict", "loc"),
    reference_tools=RADIOLOGY_REFERENCE,
    stages=(
        ("inspect", INSPECT_TOOLS),
        ("switch_sequence", frozenset({"select_volume"})),
        ("localize", RADIOLOGY_LOCALIZE),
    ),
    audit=AuditSpec("radiology", single_study, "segmentation"),
    plans={"oracle": OracleAgent.localized_plan, "heuristic": HeuristicAgent.ucsf_plan,
           "random": RandomAgent.ucsf_plan},
)

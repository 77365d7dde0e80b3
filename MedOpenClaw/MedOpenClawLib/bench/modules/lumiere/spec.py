"""LUMIERE: the RANO response of a CURRENT brain MRI study against an OLD one, with lesion-state evidence fields
and no localization (MedFlow-Bench App. H.1, Tables 4 and 5)."""

from __future__ import annotations

from ...trace_audit.specs import AuditSpec, lumiere_timepoint
from ..agents.answers import write_lumiere
from ..agents.heuristic import HeuristicAgent
from ..agents.oracle import OracleAgent
from ..agents.random_agent import RandomAgent
from ..cases import CONSISTENT_STEP, USABLE_STEP, Question
from ..labels import LUMIERE_EVIDENCE_FIELDS, RANO_OPTIONS
from ..parsers import parse_lumiere
from ..prompts import lettered_options
from ..scoring.process import INSPECT_TOOLS
from ..scoring.rules import score_lumiere
from ..truth_check import lumiere_problems
from .spec import LOC_NONE, RADIOLOGY, ModuleSpec, SubMetric, imported_on_call, single_answer

FIELD_LABELS = ("NML", "T2 Prog.", "Cur. TL", "New TL", "Cur. NTL", "New NTL")  # MedFlow-Bench Table 5


def write_synthetic(root, config) -> list[str]:
    from ..synthetic.brain_datasets import write_lumiere

    return write_lumiere(root, config.seed, config.cases, config.mri_spacing_mm, config.workers)


SPEC = ModuleSpec(
    name="lumiere",
    title="Longitudinal MRI",
    application=RADIOLOGY,
    loader=imported_on_call("MedOpenClawLib.bench.loaders.lumiere", "prepare_lumiere"),
    loader_options=("require_evidence", "min_label_cases", "images"),
    filter_steps=("RANO-rated CURRENT study", "evidence available (both segmentations)", "complete imaging",
                  "both studies in the requested image space", USABLE_STEP, CONSISTENT_STEP, "label frequency"),
    paper_count=139,  # after its filters
    dataset_dir="LUMIERE",
    write_synthetic=write_synthetic,
    truth_checks=(lumiere_problems,),
    questions=(Question("answer", "CURRENT study's RANO response label", RANO_OPTIONS),),
    system_prompt="lumiere.system.txt",
    task_prompt="lumiere.task.txt",
    format_options=lettered_options,
    parse=parse_lumiere,
    answered=single_answer,
    write_answer=write_lumiere,
    score=score_lumiere,
    localization=LOC_NONE,
    sub_metrics=tuple(SubMetric(name, label, "fields") for name, label in zip(LUMIERE_EVIDENCE_FIELDS, FIELD_LABELS)),
    detail_columns=(*LUMIERE_EVIDENCE_FIELDS, "task", "strict"),
    reference_tools=("observe", "select_volume", "fusion", "scroll", "select_volume", "scroll"),
    stages=(("inspect", INSPECT_TOOLS), ("compare_timepoints", frozenset({"select_volume", "fusion"}))),
    audit=AuditSpec("none", lumiere_timepoint, "registration"),
    plans={"oracle": OracleAgent.lumiere_plan, "heuristic": HeuristicAgent.lumiere_plan,
           "random": RandomAgent.lumiere_plan},
)

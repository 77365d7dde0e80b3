"""UCSF-PDGM: brain-tumour classification from four MRI sequences, with lesion evidence (MedFlow-Bench
App. H.1, Table 4)."""

from __future__ import annotations

from pathlib import Path

from ....apps import inspect_tools
from ....core.applications import RADIOLOGY
from ....trace_audit.specs import AuditSpec, single_study
from ...cases import USABLE_STEP, Question
from ...prompts import lettered_options
from ...scoring.process import RADIOLOGY_LOCALIZE, RADIOLOGY_REFERENCE
from ...spec import LOC_RAS_IN_MASK, ModuleSpec, imported_on_call, single_answer
from ...truth_check import localization_problems
from . import plans
from .answer import parse, score_answer, write
from .labels import UCSF_OPTIONS

PROMPTS = Path(__file__).resolve().parent / "prompts"  # this module's App. H templates

SPEC = ModuleSpec(
    name="ucsf-pdgm",
    title="Brain MRI",
    application=RADIOLOGY,
    loader=imported_on_call("MedOpenClawLib.bench.modules.ucsf_pdgm.loader", "prepare_ucsf"),
    loader_options=(),
    filter_steps=("baseline scans only (_FU follow-ups excluded)", USABLE_STEP),
    paper_count=495,
    dataset_dir="UCSF-PDGM",
    write_synthetic=imported_on_call("MedOpenClawLib.bench.modules.ucsf_pdgm.synthetic", "write_synthetic"),
    truth_checks=(localization_problems,),
    questions=(Question("answer", "Classify the case into one option", UCSF_OPTIONS),),
    no_lesion_answer="No tumor",
    system_prompt=PROMPTS / "system.txt",
    task_prompt=PROMPTS / "task.txt",
    format_options=lettered_options,
    parse=parse,
    answered=single_answer,
    write_answer=write,
    tables=("table1", "table5"),
    operations={"segmentation": "atlas"},
    score=score_answer,
    localization=LOC_RAS_IN_MASK,
    sub_metrics=(),
    detail_columns=("task", "strict", "loc"),
    reference_tools=RADIOLOGY_REFERENCE,
    stages=(
        ("inspect", inspect_tools(RADIOLOGY)),
        ("switch_sequence", frozenset({"select_volume"})),
        ("localize", RADIOLOGY_LOCALIZE),
    ),
    audit=AuditSpec("radiology", single_study, "segmentation"),
    plans={"oracle": plans.oracle, "heuristic": plans.heuristic, "random": plans.random},
)

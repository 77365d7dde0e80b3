"""LUMIERE: the RANO response of a CURRENT brain MRI study against an OLD one, with lesion-state evidence fields
and no localization (MedFlow-Bench App. H.1, Tables 4 and 5)."""

from __future__ import annotations

from pathlib import Path

from ....apps import inspect_tools
from ....core.applications import RADIOLOGY
from ....trace_audit.specs import AuditSpec
from ...cases import CONSISTENT_STEP, USABLE_STEP, Question
from ...prompts import lettered_options
from ...spec import LOC_NONE, ModuleSpec, SubMetric, imported_on_call, single_answer
from . import PREPARE_OPTIONS, plans
from .answer import parse, score_answer, write
from .labels import LUMIERE_EVIDENCE_FIELDS, RANO_OPTIONS
from .lesions import lumiere_problems

STUDIES = ("OLD", "CURRENT")


def lumiere_timepoint(name: str) -> str | None:
    """``OLD`` or ``CURRENT`` from a LUMIERE volume name (also a derived one, e.g. ``CURRENT_CT1 resampled``): the
    audit's timepoint of a volume."""
    prefix = str(name).split("_", 1)[0].upper()
    return prefix if prefix in STUDIES else None


FIELD_LABELS = ("NML", "T2 Prog.", "Cur. TL", "New TL", "Cur. NTL", "New NTL")  # MedFlow-Bench Table 5


PROMPTS = Path(__file__).resolve().parent / "prompts"  # this module's App. H templates

SPEC = ModuleSpec(
    name="lumiere",
    title="Longitudinal MRI",
    application=RADIOLOGY,
    loader=imported_on_call("MedOpenClawLib.bench.modules.lumiere.loader", "prepare_lumiere"),
    loader_options=tuple(PREPARE_OPTIONS),
    filter_steps=("RANO-rated CURRENT study", "evidence available (both segmentations)", "complete imaging",
                  "both studies in the requested image space", USABLE_STEP, CONSISTENT_STEP, "label frequency"),
    paper_count=139,  # after its filters
    dataset_dir="LUMIERE",
    write_synthetic=imported_on_call("MedOpenClawLib.bench.modules.lumiere.synthetic", "write_synthetic"),
    truth_checks=(lumiere_problems,),
    questions=(Question("answer", "CURRENT study's RANO response label", RANO_OPTIONS),),
    no_lesion_answer=None,
    system_prompt=PROMPTS / "system.txt",
    task_prompt=PROMPTS / "task.txt",
    format_options=lettered_options,
    parse=parse,
    answered=single_answer,
    write_answer=write,
    tables=("table1", "table5"),
    operations={"segmentation": "atlas", "registration": "native"},
    score=score_answer,
    localization=LOC_NONE,
    sub_metrics=tuple(SubMetric(name, label, "fields") for name, label in zip(LUMIERE_EVIDENCE_FIELDS, FIELD_LABELS)),
    detail_columns=(*LUMIERE_EVIDENCE_FIELDS, "task", "strict"),
    reference_tools=("observe", "select_volume", "fusion", "scroll", "select_volume", "scroll"),
    stages=(("inspect", inspect_tools(RADIOLOGY)), ("compare_timepoints", frozenset({"select_volume", "fusion"}))),
    audit=AuditSpec("none", lumiere_timepoint, "registration"),
    plans={"oracle": plans.oracle, "heuristic": plans.heuristic, "random": plans.random},
)

"""The record that defines one MedFlow-Bench module: everything the generic runner, scorers, report and offline
agents need to know about it, so none of them branches on a module's name.

Every field is required (no defaults): a spec that leaves one out fails when its file is imported, and
``Testing/Python/bench/modules/test_bench_modules.py`` checks that every registered spec fills each one with a
usable value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

# localization rules (MedFlow-Bench Table 4): what the module's Loc column checks
LOC_RAS_IN_MASK = "ras_in_mask"  # an answered RAS point inside the hidden lesion mask
LOC_WSI_POINT = "wsi_point"  # an answered level-0 slide coordinate inside a reference region
LOC_NONE = "none"  # the module defines no Loc (its evidence is yes/no fields)
LOCALIZATION_RULES = (LOC_RAS_IN_MASK, LOC_WSI_POINT, LOC_NONE)

# the offline agents (agents.OFFLINE_AGENTS builds them); every spec has a plan for each
OFFLINE_AGENT_NAMES = ("oracle", "heuristic", "random")
PAPER_TABLES = ("table1", "table2", "table5")  # the paper's per-module tables a module can join
SCORE_METRICS = ("task", "strict", "loc")


OPTIONAL = ("no_lesion_answer",)  # the fields that may hold None


@dataclass(frozen=True)
class SubMetric:
    """A fine-grained column (MedFlow-Bench Table 5): the mean of ``CaseScore.details[group][key]`` (or
    ``details[key]`` when ``group`` is empty) over the scored cases where it is not None."""

    key: str
    label: str
    group: str

    @property
    def path(self) -> tuple[str, ...]:
        """Where the per-case value lies in ``CaseScore.details``."""
        return (self.group, self.key) if self.group else (self.key,)


@dataclass(frozen=True)
class ModuleSpec:
    """One benchmark module. Callables are the functions in their own files (loaders, parsers, scoring rules,
    agent plans); the spec only names which one the module uses."""

    name: str  # the id on the command line and in every case package (its folder's NAME)
    title: str  # column group of the report tables ("Brain MRI")
    application: str  # core.applications: RADIOLOGY or PATHOLOGY (its cases open there; a worker's kind)
    # --- data: the dataset loader, its cohort filters and the embedded synthetic dataset
    loader: Callable[..., None]  # prepare_x(source, PackageWriter, **options)
    loader_options: tuple[str, ...]  # `bench prepare` flags (argparse dests) passed to the loader
    filter_steps: tuple[str, ...]  # the loader's cohort-filter steps, in the order it applies them
    paper_count: int  # benchmark-eligible cases in MedFlow-Bench Table 4
    dataset_dir: str  # directory of the synthetic dataset in the embedded cohort (the dataset's own name)
    write_synthetic: Callable[..., list]  # (root, CohortConfig) -> case ids written
    truth_checks: tuple[Callable[..., list], ...]  # (case, truth) -> contradictions, beyond the answer check
    # --- the task: questions, prompts, the answer format
    questions: tuple[Any, ...]  # cases.Question, in display order
    # the first question's option that says there is no lesion (the whole label, e.g. "No tumor"): such an answer
    # has no localization; None where every case has one
    no_lesion_answer: str | None
    system_prompt: Path  # its App. H templates (string.Template; [tools]...[/tools] only with tools)
    task_prompt: Path
    format_options: Callable[..., str]  # (case) -> the option block of the task prompt
    parse: Callable[[str], dict]  # raw final response -> canonical parsed answer (never raises)
    answered: Callable[[dict], bool]  # whether a parsed response holds an answer at all
    # (answers shaped like GroundTruth.answers, agents.answers.Evidence) -> final-answer text: how the oracle
    # writes the truth, and scripts a reference or constant-probe answer
    write_answer: Callable[..., str]
    # --- scoring and the report
    tables: tuple[str, ...]  # the paper's tables the module joins (PAPER_TABLES), with their model averages
    # Table 3's columns of the module: operation (tasks.OPERATION_GROUPS) -> the image space of the Track A run its
    # Track B run is compared with ("native": an unregistered control for registration)
    operations: Mapping[str, str]
    score: Callable[..., None]  # (truth, parsed, CaseScore) -> fills task/strict/loc/gates (Table 4 rule)
    localization: str  # one of LOCALIZATION_RULES
    sub_metrics: tuple[SubMetric, ...]  # aggregated beside Task/Strict/Loc
    detail_columns: tuple[str, ...]  # Table 5 column order: score metrics and sub-metric keys
    reference_tools: tuple[str, ...]  # the reference tool multiset of planning F1
    stages: tuple[tuple[str, frozenset], ...]  # workflow stages (name, tools that reach it) of progress rate
    audit: Any  # trace_audit.specs.AuditSpec: evidence kind, study of a volume name, Track B workflow
    # --- offline agents
    plans: Mapping[str, Callable]  # agent name -> (agent, AgentContext) -> Plan

    @property
    def has_loc(self) -> bool:
        return self.localization != LOC_NONE

    @property
    def metrics(self) -> tuple[str, ...]:
        """The score columns the module defines (Loc only where it has a localization rule)."""
        return tuple(metric for metric in SCORE_METRICS if metric != "loc" or self.has_loc)

    def read_answer(self, text: str | None) -> dict:
        """The module's parse of one raw final response; never raises (a parser defect becomes an error entry,
        so it cannot crash a whole scoring run)."""
        try:
            return self.parse(text if isinstance(text, str) else "")
        except Exception as error:
            empty = self.parse("")
            empty["errors"] = [f"parser failure: {type(error).__name__}: {error}"]
            return empty

    def plan(self, agent_name: str) -> Callable:
        """The offline agent's plan for this module; a clear error for an agent the spec does not know."""
        if agent_name not in self.plans:
            raise ValueError(f"module {self.name!r} has no plan for the {agent_name!r} agent "
                             f"(it has: {', '.join(sorted(self.plans))})")
        return self.plans[agent_name]


def unset_fields(spec: ModuleSpec) -> list[str]:
    """Fields of ``spec`` holding None: every field must be set (an empty tuple is a value; ``no_lesion_answer``
    may be None)."""
    return [item.name for item in fields(spec) if getattr(spec, item.name) is None and item.name not in OPTIONAL]


def imported_on_call(module: str, function: str) -> Callable:
    """``module.function``, imported when first called: a spec names its loader without importing it (some
    loaders need the viewer, and listing or scoring modules must not)."""
    import importlib

    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), function)(*args, **kwargs)

    call.__name__ = call.__qualname__ = function
    call.__doc__ = f"{module}.{function} (imported on first call)"
    call.target = (module, function)
    return call


def single_answer(parsed: dict) -> bool:
    """``answered`` of the modules whose parsed response is one ``answer``."""
    return parsed.get("answer") is not None

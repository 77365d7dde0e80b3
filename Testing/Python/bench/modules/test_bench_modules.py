"""The module specs (bench.modules): every registered module fills every field with a usable value, and a module
no spec defines fails fast with a clear error wherever a module name enters."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import pytest

from MedOpenClawLib.bench import modules
from MedOpenClawLib.bench.cases import Case, CaseFormatError, GroundTruth, Question
from MedOpenClawLib.bench.modules import check_module, get
from MedOpenClawLib.bench.scoring.rules import CaseScore
from MedOpenClawLib.bench.spec import LOCALIZATION_RULES, OFFLINE_AGENT_NAMES, PAPER_TABLES, ModuleSpec, unset_fields
from MedOpenClawLib.bench.truth_check import localization_problems
from MedOpenClawLib.core.applications import APPLICATIONS, PATHOLOGY

SPECS = [pytest.param(name, id=name) for name in modules.names()]


@pytest.fixture(scope="module")
def action_names(tmp_path_factory) -> dict[str, set[str]]:
    """Every action each application's registry declares, whatever the track."""
    from MedOpenClawLib.apps.radiology import build_slicer_registry
    from MedOpenClawLib.pathology.actions import build_pathology_registry

    root = str(tmp_path_factory.mktemp("data"))
    return {
        modules.RADIOLOGY: {action.name for action in build_slicer_registry(data_roots=[root]).all_actions()},
        PATHOLOGY: {action.name for action in build_pathology_registry(data_roots=[root]).all_actions()},
    }


@pytest.mark.parametrize("name", SPECS)
def test_spec_sets_every_field(name):
    spec = modules.get(name)
    assert isinstance(spec, ModuleSpec) and spec.name == name
    assert unset_fields(spec) == []
    assert spec.title and spec.dataset_dir and spec.paper_count > 0
    assert spec.application in APPLICATIONS and spec.localization in LOCALIZATION_RULES
    assert spec.questions and all(question.options for question in spec.questions)
    for field in ("loader", "write_synthetic", "format_options", "parse", "answered", "write_answer", "score"):
        assert callable(getattr(spec, field)), field
    assert all(callable(check) for check in spec.truth_checks)
    assert set(spec.plans) == set(OFFLINE_AGENT_NAMES) and all(callable(plan) for plan in spec.plans.values())
    assert spec.system_prompt.is_file() and spec.task_prompt.is_file()
    assert spec.no_lesion_answer in (None, *(label for _, label in spec.questions[0].options))
    assert spec.tables and set(spec.tables) <= set(PAPER_TABLES)
    module, function = getattr(spec.loader, "target", (None, None))
    if module is not None:  # named, imported when a package is prepared: it must exist
        assert callable(getattr(importlib.import_module(module), function))


@pytest.mark.parametrize("name", SPECS)
def test_report_columns_cover_every_metric_once(name):
    spec = modules.get(name)
    expected = [*spec.metrics, *(metric.key for metric in spec.sub_metrics)]
    assert sorted(spec.detail_columns) == sorted(expected)
    assert ("loc" in spec.metrics) == spec.has_loc
    assert all(metric.label for metric in spec.sub_metrics)


@pytest.mark.parametrize("name", SPECS)
def test_reference_tools_and_stages_are_actions_of_its_application(name, action_names):
    spec = modules.get(name)
    declared = action_names[spec.application]
    assert spec.reference_tools and set(spec.reference_tools) <= declared
    assert spec.stages
    for stage, tools in spec.stages:
        assert stage and tools and set(tools) <= declared, stage


@pytest.mark.parametrize("name", SPECS)
def test_empty_response_parses_to_no_answer_and_scores_zero(name):
    spec = modules.get(name)
    parsed = spec.parse("")
    assert parsed["errors"] and not spec.answered(parsed)
    answers = {question.qid: question.options[0][0] for question in spec.questions}
    truth = GroundTruth(name, "X-1", answers, evidence_fields={metric.key: None for metric in spec.sub_metrics})
    score = CaseScore(name, "X-1")
    spec.score(truth, parsed, score)
    assert score.task == 0.0


@pytest.mark.parametrize("name", SPECS)
def test_loader_options_are_flags_of_bench_prepare(name):
    from MedOpenClawLib.cli import build_parser

    args = build_parser().parse_args(["bench", "prepare", "--module", name, "--source", "s", "--out", "o"])
    assert all(hasattr(args, option) for option in modules.get(name).loader_options)


@pytest.mark.parametrize("name", SPECS)
def test_option_block_names_every_option(name):
    spec = modules.get(name)
    case = Case(name, "X-1", "data/X-1", ["data/X-1"], questions=list(spec.questions))
    block = spec.format_options(case)
    assert all(label in block for question in spec.questions for _, label in question.options)


def test_of_application_partitions_the_registry():
    radiology, pathology = modules.of_application(modules.RADIOLOGY), modules.of_application(PATHOLOGY)
    assert sorted(radiology + pathology) == sorted(modules.names()) and not set(radiology) & set(pathology)
    with pytest.raises(ValueError, match="unknown application"):
        modules.of_application("slicer")


def test_unknown_module_fails_fast_with_the_known_names():
    with pytest.raises(modules.UnknownModule, match="unknown module 'tcga'.*ucsf-pdgm"):
        modules.get("tcga")
    with pytest.raises(CaseFormatError, match="unknown module"):
        check_module("tcga")
    with pytest.raises(CaseFormatError, match="unknown module"):
        Case.from_json({"module": "tcga", "case_id": "1", "data_dir": "d", "open_paths": []})

    with pytest.raises(ValueError, match="unknown module"):
        get("tcga").read_answer("ANSWER: A")


def test_a_spec_that_leaves_a_field_out_cannot_be_built():
    spec = modules.get("ucsf-pdgm")
    values = {field.name: getattr(spec, field.name) for field in dataclasses.fields(ModuleSpec)}
    del values["stages"]
    with pytest.raises(TypeError, match="stages"):
        ModuleSpec(**values)
    assert unset_fields(dataclasses.replace(spec, sub_metrics=None)) == ["sub_metrics"]


def test_an_agent_without_a_plan_is_named():
    with pytest.raises(ValueError, match="no plan for the 'montage' agent"):
        modules.get("bracs").plan("montage")


def test_a_module_names_its_own_no_lesion_answer():
    """A module whose "no lesion" option is not worded "No tumor" (a liver CT's "No focal lesion") gets its
    no-lesion cases through the localization check by naming that option in its spec, whole label only."""
    question = Question("answer", "Classify the lesion", (("A", "Hepatocellular carcinoma"), ("B", "No focal lesion"),
                                                          ("C", "No tumor growth pattern")))
    spec = dataclasses.replace(modules.get("ucsf-pdgm"), questions=(question,), no_lesion_answer="No focal lesion")
    case = Case("ucsf-pdgm", "L-1", "data/L-1", ["data/L-1"], questions=[question])
    no_lesion = GroundTruth("ucsf-pdgm", "L-1", {"answer": "B"}, {"answer": "No focal lesion"})
    assert localization_problems(case, no_lesion, spec) == []
    similar = GroundTruth("ucsf-pdgm", "L-1", {"answer": "C"}, {"answer": "No tumor growth pattern"})
    assert localization_problems(case, similar, spec) == ["a tumour answer has no localization"]
    assert localization_problems(case, no_lesion, modules.get("ucsf-pdgm")) == ["a tumour answer has no localization"]


def test_modules_are_found_by_discovery_in_report_order():
    """Each folder under bench/modules names its module; the registry lists what it finds, no table to edit."""
    folders = sorted(path.name for path in Path(modules.__file__).parent.iterdir() if (path / "spec.py").is_file())
    assert len(modules.names()) == len(folders) == 5
    assert modules.names() == ("lumiere", "ucsf-pdgm", "nsclc", "bracs", "camelyon17")
    assert modules.in_table("table2") == modules.of_application(PATHOLOGY)

"""One catalog of every action: both applications listed with their application, schemas portable (what the
MCP Inspector's strict mode, OpenAI and Anthropic accept), argument combinations checked but stated in words,
an unknown action answered as such whatever its arguments hold."""

from __future__ import annotations

import json

import pytest
from agents_fakes import ToyContext, toy_tools

from MedOpenClawLib import apps, cli
from MedOpenClawLib.core.applications import APPLICATIONS
from MedOpenClawLib.core.audit import AuditTrace
from MedOpenClawLib.core.formats import portability_problems
from MedOpenClawLib.core.registry import ActionRegistry
from MedOpenClawLib.core.result import Result
from MedOpenClawLib.core.toolset import Toolset
from MedOpenClawLib.server.openapi import RESULT_SCHEMA


def test_every_action_of_every_application_is_listed():
    entries = apps.entries()
    assert {entry["application"] for entry in entries} == set(APPLICATIONS)
    pathology = {entry["name"] for entry in apps.entries("pathology")}
    assert {"load_image", "zoom", "pan", "capture_viewer", "viewer_point_to_wsi_coordinate",
            "record_view_as_evidence", "focus_qupath"} <= pathology
    radiology_b = {spec.name for spec in apps.specs("radiology", "B")}
    assert {"open_case", "vista3d_segment"} <= radiology_b
    assert "vista3d_segment" not in {spec.name for spec in apps.specs("radiology", "A")}
    with pytest.raises(ValueError, match="application must be one of"):
        apps.entries("dermatology")


def test_medopenclaw_tools_lists_both_applications(capsys):
    assert cli.main(["tools"]) == 0
    table = capsys.readouterr().out
    assert "| `open_case` | radiology |" in table and "| `capture_viewer` | pathology |" in table
    assert cli.main(["tools", "--app", "pathology", "--format", "neutral"]) == 0
    tools = json.loads(capsys.readouterr().out)
    assert {tool["name"] for tool in tools} == {entry["name"] for entry in apps.entries("pathology")}
    assert set(tools[0]) == {"name", "description", "parameters"}
    assert cli.main(["tools", "--app", "radiology", "--track", "A", "--format", "mcp"]) == 0
    assert "vista3d_segment" not in {tool["name"] for tool in json.loads(capsys.readouterr().out)}
    assert cli.main(["tools", "--format", "gemini"]) == 0  # the providers' converter: Gemini's schema subset
    gemini = capsys.readouterr().out
    assert '"additionalProperties"' not in gemini and '"exclusiveMinimum"' not in gemini
    assert cli.main(["tools", "--format", "anthropic"]) == 0
    assert set(json.loads(capsys.readouterr().out)[0]) == {"name", "description", "input_schema"}


@pytest.mark.parametrize("entry", apps.entries(), ids=lambda entry: f"{entry['application']}:{entry['name']}")
def test_every_schema_is_portable(entry):
    assert portability_problems(entry["parameters"]) == []


def test_the_result_schema_is_portable():
    assert portability_problems(RESULT_SCHEMA, where="#") == []


@pytest.mark.parametrize(("schema", "problem"), [
    ({"type": "object", "anyOf": [{"required": ["a"]}]}, "anyOf at the root"),
    ({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}, "needs one type"),
    ({"type": "object", "properties": {"a": {"description": "untyped"}}}, "needs one type"),
    ({"type": "object", "properties": {"a": True}}, "must be an object"),
    ({"type": "object", "properties": {"a": {"type": "string", "minimum": 1}}}, "minimum is not a portable string"),
    ({"type": "object", "properties": {"a": {"type": "string", "const": "x"}}}, "const is not a portable"),
    ({"type": "object", "required": ["b"], "properties": {}}, "required 'b' is not among its properties"),
    ({"type": "object", "additionalProperties": {"type": "string"}}, "additionalProperties must be false"),
    ({"type": "string"}, "must be an object"),
])
def test_unportable_schemas_are_named(schema, problem):
    assert any(problem in line for line in portability_problems(schema))


def rules_registry() -> ActionRegistry:
    rules = Toolset("rules")

    @rules.action("pick", "viewer", "Pick a volume.",
                  {"volume_id": {"type": "string"}, "volume_name": {"type": "string"}},
                  anyOf=[{"required": ["volume_id"]}, {"required": ["volume_name"]}])
    def pick(context, volume_id=None, volume_name=None) -> Result:
        return Result(True, {"picked": volume_id or volume_name})

    return ActionRegistry(ToyContext(), [toy_tools, rules], AuditTrace(None))


def test_argument_combinations_are_checked_and_described_but_not_published():
    registry = rules_registry()
    action = registry.get("pick")
    assert "anyOf" not in action.parameters and action.description == "Pick a volume. Give volume_id or volume_name."
    assert registry.call("pick", {}).error["code"] == "invalid_argument"
    assert registry.call("pick", {"volume_name": "CT"}).data == {"picked": "CT"}


def test_an_unknown_action_is_unknown_whatever_its_arguments_hold():
    registry = rules_registry()
    deep: dict = {}
    for _ in range(100):
        deep = {"x": deep}
    for arguments in (deep, ["not", "an", "object"], {"text": "\x00"}):
        assert registry.call("run_python", arguments).error["code"] == "unknown_action"
    assert registry.call("pick", deep).error["code"] == "invalid_argument"
    deep_unknown, _, _, deep_known = registry.trace.records[-4:]
    assert set(deep_unknown["arguments"]) == set(deep_known["arguments"]) == {"refused_input"}  # bounded, auditable


def test_each_pathology_action_has_one_name_in_python_and_java():
    """The QuPath bridge's entry points are the actions' names in camelCase, each audited under the action's own
    name with the schema's argument names, and the gateway lets exactly those through."""
    import re
    from pathlib import Path

    source = (Path(__file__).resolve().parents[3] / "MedOpenClaw" / "QuPathBridge" / "src" / "main" / "java" / "org"
              / "medopenclaw" / "qupath" / "BridgeEntryPoint.java").read_text()
    methods = re.findall(r'public String (\w+)\([^)]*\) \{\s*return core\.execute\("(\w+)", args\(([^)]*)\)', source)
    operations = set(re.findall(r'"(\w+)"', re.search(r"OPERATIONS = Set\.of\(([^)]*)\)", source).group(1)))
    actions = {entry["name"]: entry for entry in apps.entries("pathology")}
    assert {action for _, action, _ in methods} == set(actions)
    assert operations == {method for method, _, _ in methods}
    for method, action, arguments in methods:
        camel = re.sub(r"_(\w)", lambda match: match.group(1).upper(), action)
        assert method == camel, f"{action} is {method} in Java"
        names = re.findall(r'"(\w+)"', arguments)
        assert names == list(actions[action]["parameters"].get("properties", {})), action

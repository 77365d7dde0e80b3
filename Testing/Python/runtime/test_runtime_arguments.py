"""The shared argument schemas (MedOpenClawLib.core.arguments): every action of every application declares a view,
size, image_id, screen point, RAS point, label or volume with the one schema, volumes follow one convention
(volume_id / volume_name for the volume acted on, <role>_volume_ref for a volume in a role) resolved by one
resolver, arguments renamed since are read under their current names, and defaults are written once, in the
schema, and passed by the registry."""

from __future__ import annotations

import inspect

import jsonschema
import pytest
from test_runtime_registry import CountingContext

from MedOpenClawLib import apps
from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.core import arguments
from MedOpenClawLib.core.applications import APPLICATIONS
from MedOpenClawLib.core.registry import ActionRegistry
from MedOpenClawLib.core.result import ActionError, Result
from MedOpenClawLib.core.toolset import Toolset
from MedOpenClawLib.pathology.geometry import NORMALISED_SPAN

SHARED = {
    "view": arguments.VIEW, "size": arguments.SIZE, "image_id": arguments.IMAGE_ID, "ras": arguments.RAS,
    "volume_id": arguments.VOLUME_ID, "volume_name": arguments.VOLUME_NAME,
    **{name: arguments.POINT_1000 for name in ("point_1000", "center_1000", "start_1000", "end_1000")},
    **{name: arguments.RAS for name in ("start_ras", "end_ras")},
}
LABELS = {"radiology": arguments.LABEL, "pathology": arguments.WSI_LABEL}


def properties():
    for entry in apps.generate():
        for name, schema in entry["parameters"]["properties"].items():
            yield entry, name, schema


def test_every_action_declares_the_shared_arguments_with_the_one_schema():
    checked = 0
    for entry, name, schema in properties():
        expected = SHARED.get(name) or (LABELS[entry["application"]] if name == "label" else None)
        if entry["application"] == "radiology" and expected is not None:
            assert schema == expected, f"{entry['name']}.{name} is not arguments.{name.upper()}"
            checked += 1
    assert checked > 40  # the view, size, image_id, ... of most radiology tools


def test_volumes_follow_one_convention():
    for entry, name, schema in properties():
        if "volume" not in name or schema.get("type") in ("boolean", "number", "integer"):
            continue  # a flag or a quantity (get_viewer_state's include_volumes, segment_region's max_volume_ml)
        if name.endswith("_volume_ref"):
            nullable = {"anyOf": [{"type": "string"}, {"type": "null"}]}  # fusion's foreground: null = off
            assert schema == arguments.VOLUME_REF or schema.items() >= nullable.items(), entry["name"]
        else:
            assert name in arguments.VOLUME, f"{entry['name']}.{name}: neither volume_id/volume_name nor *_volume_ref"
    for entry in apps.generate():
        given = {name for name in entry["parameters"]["properties"] if name in arguments.VOLUME}
        assert given in (set(), set(arguments.VOLUME)), f"{entry['name']} offers {given} of the volume pair"


def test_pathology_points_are_the_viewer_normalised_span():
    assert arguments.COORDINATE_1000["maximum"] == NORMALISED_SPAN - 1


def test_renamed_arguments_are_read_under_their_current_names():
    assert arguments.canonical_arguments("register_volumes", {"fixed_volume": "a", "moving_volume_ref": "b"}) == {
        "fixed_volume_ref": "a", "moving_volume_ref": "b"}
    untouched = {"volume_name": "CT"}
    assert arguments.canonical_arguments("select_volume", untouched) is untouched
    assert arguments.canonical_arguments("resample_volume", ["not", "an", "object"]) == ["not", "an", "object"]
    with pytest.raises(ActionError, match="give reference_volume_ref only"):
        arguments.canonical_arguments("resample_volume", {"reference_volume": "a", "reference_volume_ref": "b"})
    current = {entry["name"]: set(entry["parameters"]["properties"]) for entry in apps.generate()}
    for action, renamed in arguments.RENAMED.items():
        assert set(renamed.values()) <= current[action] and not set(renamed) & current[action], action


def test_one_resolver_takes_a_name_or_a_node_id_wherever_a_volume_is_named(data_root):
    registry = build_slicer_registry([data_root])
    opened = registry.call("open_case", {"dicom_dir": str(data_root / "CT.nii.gz"), "size": 64})
    assert opened.ok, opened.error
    node_id = opened.data["volumes"][0]["id"]
    for name, call in (("select_volume", {"volume_name": node_id}), ("select_volume", {"volume_name": "ct"}),
                       ("record_point", {"ras": registry.call("image_coords_to_ras", {
                           "view": "axial", "point_1000": [500, 500], "volume_id": node_id}).data["ras"],
                           "volume_name": node_id}),
                       ("fusion", {"background_volume_ref": node_id, "size": 64})):
        result = registry.call(name, {"size": 64, **call} if name == "select_volume" else call)
        assert result.ok, (name, result.error)
    missing = registry.call("wl", {"volume_id": "CT", "auto": True}).error  # a name is no node id
    assert missing["code"] == "volume_not_found" and "CT" in missing["message"]


def handlers():
    for application in APPLICATIONS:
        for toolset in apps.toolsets(application, "B"):
            yield from toolset.actions


def test_defaults_are_written_once_in_the_schema_and_the_registry_passes_them():
    for action in handlers():
        parameters = list(inspect.signature(action.handler).parameters.values())[1:]
        properties = action.parameters["properties"]
        assert {parameter.name for parameter in parameters} == set(properties), action.name
        required = action.parameters.get("required", [])
        for parameter in parameters:
            given = "default" in properties[parameter.name] or parameter.name in required  # always passed
            expected = inspect.Parameter.empty if given else None  # None: the argument was not given
            assert parameter.default is expected, (
                f"{action.name}({parameter.name}={parameter.default!r}): a default is written in the schema only")
        for name, value in action.defaults.items():
            jsonschema.validate(value, properties[name])


def test_the_registry_fills_defaults_and_records_what_was_sent():
    toolset = Toolset("defaults")

    @toolset.action("pick", "viewer", "Echo.", {"n": {"type": "integer", "default": 3},
                                                   "tags": {"type": "array", "default": []}})
    def pick(context, n: int, tags: list) -> Result:
        tags.append("x")  # a handler changing a default must not change the next call's
        return Result(ok=True, data={"n": n, "tags": tags})

    registry = ActionRegistry(CountingContext(), [toolset])
    assert registry.call("pick").data == {"n": 3, "tags": ["x"]}
    assert registry.call("pick", {"n": 5}).data == {"n": 5, "tags": ["x"]}
    assert [record["arguments"] for record in registry.trace.actions()] == [{}, {"n": 5}]

"""Schema-driven property test over every action of Track A, Track B and pathology.

For each action, Hypothesis drives the shared generator (``action_fuzz``): arguments drawn from the action's own
JSON schema (mostly valid, names and paths taken from the scene and from a pool that includes links out of the
data root), then, for half the examples, one value replaced by an adversarial one (NaN, lone surrogates, NUL,
printf directives, deep nesting). (hypothesis-jsonschema 0.23 cannot draw object schemas with the installed
Hypothesis 6.170, so the schema walk is our own.) Every call must keep the registry's invariants: no exception,
audited, no internal_error, a refused call changes nothing, strict-JSON state and result, no file outside the
data roots in the scene, no hostile file (detached headers pointing out, non-UTF-8 and control-character names,
huge headers, one-tile slides) loaded, no unsafe name in the scene. Hostile model replies go through every
answer parser and the tool-argument decoder. ``scripts/fuzz_actions.py`` runs the same generator for >= 10,000
calls.
"""

from __future__ import annotations

import random

import pytest
from action_fuzz import (
    HOSTILE_REPLIES,
    SLOW_ACTIONS,
    Tally,
    build_session,
    check_model_reply,
    checked_call,
    mutate,
    priming_calls,
    sample_object,
    tame,
)
from action_fuzz import write_layout as write_fuzz_layout
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.pathology.actions import build_pathology_registry
from MedOpenClawLib.pathology.viewer import HeadlessWsiViewer

KINDS = {
    "A": [action.name for action in build_slicer_registry([], track="A").actions()],
    "B": [action.name for action in build_slicer_registry([], track="B").actions()],
    "pathology": [action.name for action in build_pathology_registry([], viewer=HeadlessWsiViewer()).actions()],
}
CASES = [(kind, name) for kind, names in KINDS.items() for name in names
         if not (kind == "B" and name in KINDS["A"])]  # Track B adds the operators; the rest is covered on A
ZERO = ("escapes", "unaudited", "internal_errors", "refused_changed_state", "non_finite_state", "non_json_results",
        "root_escapes", "hostile_files_loaded", "unsafe_scene_names")


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    layout = write_fuzz_layout(tmp_path_factory.mktemp("fuzz"))
    built = {}
    for kind in KINDS:
        session = build_session(kind, layout, None)
        tally = Tally()
        for name, arguments in priming_calls(session):
            checked_call(session, name, arguments, tally)
        assert tally.ok == tally.calls, tally.to_json()
        built[kind] = session
    return built


@pytest.mark.parametrize("kind, name", CASES)
@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_action_keeps_the_registry_invariants(sessions, kind, name, data):
    session = sessions[kind]
    action = session.registry.get(name)
    if name in SLOW_ACTIONS and data.draw(st.integers(0, 3), label="slow action gate") != 0:
        return
    # a seeded generator: its draws depend on the scene (names, paths), which Hypothesis must not see as data
    rng = random.Random(data.draw(st.integers(0, 2**32 - 1), label="generator seed"))
    arguments = sample_object(action.parameters, rng, session)
    if data.draw(st.booleans(), label="adversarial"):
        arguments = mutate(arguments, rng)
    tally = Tally()
    checked_call(session, name, tame(name, arguments), tally)
    report = tally.to_json()
    assert all(report[key] == 0 for key in ZERO), report["examples"]


def test_the_property_test_covers_every_action_of_every_registry():
    covered = {name for _, name in CASES}
    assert covered == set(KINDS["A"]) | set(KINDS["B"]) | set(KINDS["pathology"])
    assert {"open_case", "record_point", "register_volumes", "import_dicom_seg", "load_case", "sleep"} <= covered


@pytest.mark.parametrize("kind", ["A", "pathology"])
def test_no_hostile_file_is_ever_loaded(sessions, kind):
    session = sessions[kind]
    tally = Tally()
    for path in session.layout.refused_files + [str(session.layout.root / "hostile")]:
        if kind == "pathology":
            calls = [("load_image", {"image_path": path}), ("load_case", {"case_path": path})]
        else:
            calls = [("open_case", {"dicom_dir": path, "size": 64, "keep_loaded": keep}) for keep in (False, True)]
        for name, arguments in calls:
            checked_call(session, name, arguments, tally)
    report = tally.to_json()
    assert all(report[key] == 0 for key in ZERO), report["examples"]
    assert report["ok"] <= 2  # only the folder itself opens (its one clean volume); every hostile file is refused


@pytest.mark.parametrize("reply", range(len(HOSTILE_REPLIES)))
def test_hostile_model_replies_are_parsed_without_raising(reply):
    tally = Tally()
    check_model_reply(HOSTILE_REPLIES[reply], tally)
    report = tally.to_json()
    assert all(report[key] == 0 for key in ZERO), report["examples"]

"""The offline agents end to end over real headless workers (warm ones shared by the in-process runs and the
toolset commands; the README's command per module starts its own): the heuristic finds and reports a lesion
through the tools deterministically, replay reproduces a recorded run, the Track C montage agent sends one turn of
slice montages to a (local fake) model, and the `bench run` command line on the embedded synthetic cohort: oracle
Strict = 1.0 on every module, aggregate JSON as the last stdout line."""

from __future__ import annotations

import io
import json
from functools import partial

import pytest
from agents_cases import SEQUENCES, write_ucsf_package
from agents_fakes import FakeModelServer, Scripted, openai_reply
from warm_workers import WarmPool

from MedOpenClawLib.apps import entries
from MedOpenClawLib.bench.agents.heuristic import HeuristicAgent
from MedOpenClawLib.bench.agents.model import ModelAgent
from MedOpenClawLib.bench.agents.oracle import OracleAgent
from MedOpenClawLib.bench.agents.replay import ReplayAgent, episode_trace, recorded_outputs
from MedOpenClawLib.bench.executors import LocalExecutor
from MedOpenClawLib.bench.modules import names
from MedOpenClawLib.bench.preload import module_prompt
from MedOpenClawLib.bench.runner import BenchmarkRunner, RunConfig
from MedOpenClawLib.bench.tasks import offered_tools, operator_names
from MedOpenClawLib.cli import main
from MedOpenClawLib.core.audit import read_trace
from MedOpenClawLib.providers import ProviderConfig, RetryPolicy, make_provider
from MedOpenClawLib.viewer.actions import VIEWER

# MedFlow-Bench Table 9 (radiology) and Table 10 (pathology): the tools the paper's agents see
VIEWER_TABLE_9 = {"ping", "open_case", "select_volume", "observe", "scroll", "zoom", "fit", "set_slice_offset",
                  "get_slice_offset_range", "recover_standard_views", "image_coords_to_ras", "get_viewer_state", "wl",
                  "window_preset", "jump", "set_layout", "fusion"}
PATHOLOGY_TABLE_10 = {"zoom", "pan", "focus_qupath", "capture_viewer", "viewer_point_to_wsi_coordinate"}


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return write_ucsf_package(tmp_path_factory.mktemp("cases"), cases=2)


def run(cases, out, make_agent, agent: str, pool: WarmPool, **options) -> dict:
    """An in-process run on one worker of the session's warm pool (each worker start costs ~2.5 s of CPU, almost
    all of it importing slicer-core): warm across these runs as it is across the episodes of one run."""
    config = RunConfig(module="ucsf-pdgm", agent=agent, out=out, cases_dir=cases, **options)

    def executor(job, config, on_round):
        return LocalExecutor(job, 1, on_round, launch=partial(pool.local_worker, config))

    return BenchmarkRunner(config, make_agent, module_prompt, progress_stream=io.StringIO(),
                           make_executor=executor).run()


def episodes(out) -> dict[str, dict]:
    return {path.parent.name: json.loads(path.read_text()) for path in (out / "episodes").glob("*/result.json")}


def actions(out, record) -> list[str]:
    return [r["action"] for r in read_trace(out / record["trace"]) if r.get("kind") == "action" and
            r.get("actor") == "agent"]


def test_heuristic_localizes_through_tools_and_is_deterministic(cases, warm_pool, tmp_path):
    first = run(cases, tmp_path / "a", lambda task: HeuristicAgent(), "heuristic", warm_pool)
    run(cases, tmp_path / "b", lambda task: HeuristicAgent(), "heuristic", warm_pool)
    assert first["invalid"] == 0 and first["loc"] == 1.0  # the fixture lesion is the brightest FLAIR blob
    a, b = episodes(tmp_path / "a"), episodes(tmp_path / "b")
    assert {k: v["response"] for k, v in a.items()} == {k: v["response"] for k, v in b.items()}
    used = actions(tmp_path / "a", a["UCSF-PDGM-0001__r1"])
    assert {"scroll", "image_coords_to_ras", "jump"} <= set(used) <= set(VIEWER_TABLE_9)  # the paper's tools only
    assert "EVIDENCE:" in a["UCSF-PDGM-0001__r1"]["response"]
    assert all(record["audit"]["findings"] == [] for record in a.values())  # it shows every slice it cites


def test_replay_reproduces_a_recorded_run(cases, warm_pool, tmp_path):
    recorded = run(cases, tmp_path / "oracle", lambda task: OracleAgent(), "oracle", warm_pool)

    def replay(task):
        trace = episode_trace(tmp_path / "oracle", task.episode_id)
        return ReplayAgent(recorded_outputs(trace), source=str(trace))

    replayed = run(cases, tmp_path / "replay", replay, "replay", warm_pool)
    assert replayed["strict"] == recorded["strict"] == 1.0
    original, again = episodes(tmp_path / "oracle"), episodes(tmp_path / "replay")
    for episode_id, record in original.items():
        assert again[episode_id]["response"] == record["response"]
        assert actions(tmp_path / "replay", again[episode_id]) == actions(tmp_path / "oracle", record)
    with pytest.raises(ValueError, match="no recorded episode"):
        episode_trace(tmp_path / "oracle", "UCSF-PDGM-9999__r1")


def test_montage_agent_sends_one_turn_of_series_montages(cases, warm_pool, tmp_path):
    answer = "Montage read.\nEVIDENCE:\nKEY_SLICE_AXIAL_MM: 1.0\nKEY_SLICE_SAGITTAL_MM: 2.0\n" \
             "KEY_SLICE_CORONAL_MM: 3.0\nRAS: [2.0, 3.0, 1.0]\nANSWER: A"
    with FakeModelServer([Scripted(openai_reply(answer))] * 2) as server:
        config = ProviderConfig(kind="openai", model="fake-vlm", base_url=server.url, api_key="k",
                                retry=RetryPolicy(max_retries=0))
        summary = run(cases, tmp_path / "c", lambda task: ModelAgent(make_provider(config), name="montage"),
                      "montage", warm_pool, track="C", provider=config)
    assert summary["n"] == 2 and summary["invalid"] == 0
    assert len(server.requests) == 2  # one request per episode: a single answer turn
    body = server.requests[0]["body"]
    assert "tools" not in body
    user = body["messages"][1]["content"]
    images = [part for part in user if part["type"] == "image_url"]
    assert len(images) == len(SEQUENCES)  # one montage per loaded series
    assert "Track C (2D slice montage)" in user[0]["text"]
    system = body["messages"][0]["content"]
    for tool_text in ("tool-calling rounds", "tools exposed in this run", "image_coords_to_ras", "select_volume"):
        assert tool_text not in system + user[0]["text"]  # nothing asks for tools that are not offered
    record = episodes(tmp_path / "c")["UCSF-PDGM-0001__r1"]
    assert record["response"].endswith("ANSWER: A") and record["outcome"]["rounds"] == 0
    scrolls = [r for r in read_trace(tmp_path / "c" / record["trace"]) if r.get("action") == "scroll"]
    assert len(scrolls) == len(SEQUENCES) and all(r["actor"] == "system" for r in scrolls)


@pytest.mark.parametrize("arguments, message", [
    (["--agent", "montage", "--model", "m"], "add --track C"),
    (["--agent", "oracle", "--track", "C"], "Track C runs --agent montage"),
    (["--agent", "replay"], "needs --replay-from"),
])
def test_run_refuses_inconsistent_agent_and_track(arguments, message, tmp_path, capsys):
    code = main(["bench", "run", "--module", "ucsf-pdgm", "--out", str(tmp_path / "x"), *arguments])
    assert code == 2 and message in capsys.readouterr().err


def test_track_c_refuses_pathology(tmp_path, capsys):
    code = main(["bench", "run", "--module", "bracs", "--agent", "montage", "--model", "m", "--track", "C",
                 "--out", str(tmp_path / "x")])
    assert code == 2 and "radiology modules only" in capsys.readouterr().err


@pytest.mark.parametrize("module", names())
@pytest.mark.usefixtures("warm_workers")  # its subject is the oracle's scores, not the worker's start
def test_oracle_is_perfect_on_the_embedded_cohort(module, tmp_path, capsys):
    """The README's main command on every module (the cohort is generated once into the shared cache), its
    episodes on the warm workers: fresh ones cost two starts per module (~2 s of CPU each), and the README's
    commands, which the docs group runs as typed, start their own."""
    assert main(["bench", "run", "--module", module, "--agent", "oracle", "--limit", "2",
                 "--out", str(tmp_path / module)]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"module", "n", "task", "strict", "loc", "invalid"} <= set(last)
    assert last["module"] == module and last["n"] == 2 and last["invalid"] == 0
    assert last["task"] == 1.0 and last["strict"] == 1.0 and last["loc"] in (1.0, None)
    results = episodes(tmp_path / module)
    assert len(results) == 2 and all(result["audit"]["findings"] == [] for result in results.values())
    assert last["audit"]["episodes"] == 2 and last["audit"]["with_findings"] == 0


def test_the_paper_toolsets_are_offered_by_default_and_extended_on_request():
    """Tables 9 and 10 are what the paper's agents see; Track B adds its operators (one operation at a time)."""
    radiology = [{"name": entry["name"]} for entry in entries("radiology", "B")]
    pathology = [{"name": entry["name"]} for entry in entries("pathology", "A")]
    names = lambda tools: [tool["name"] for tool in tools]  # noqa: E731
    track_a = [tool for tool in radiology if tool["name"] not in operator_names()]
    assert set(names(offered_tools(track_a, "radiology", "paper"))) == VIEWER_TABLE_9
    assert set(VIEWER_TABLE_9) == {action.name for action in VIEWER.actions}  # Table 9 is the viewer toolset
    assert {"record_key_slices", "bookmark_view"} <= set(names(offered_tools(track_a, "radiology", "extended")))
    registration = ("apply_transform", "register_volumes", "resample_volume")
    assert set(names(offered_tools(radiology, "radiology", "paper", registration))) == {*VIEWER_TABLE_9,
                                                                                       *registration}
    assert set(names(offered_tools(pathology, "pathology", "paper"))) == PATHOLOGY_TABLE_10
    assert len(offered_tools(pathology, "pathology", "extended")) == len(pathology) > len(PATHOLOGY_TABLE_10)
    with pytest.raises(ValueError, match="toolset must be one of paper, extended"):
        offered_tools(track_a, "radiology", "everything")


@pytest.mark.usefixtures("warm_workers")  # the commands as typed, their episodes on a warm worker
def test_a_model_run_records_its_toolset_and_a_replay_keeps_it(cases, tmp_path, capsys):
    """Under the default (paper) toolset an evidence-capture call is refused and nothing is executed; with
    ``--toolset extended`` it runs; run.json and the report name the toolset, and a replay keeps the replayed
    run's."""
    answer = openai_reply("Done.\nANSWER: A")
    record = openai_reply(calls=[("record_point", '{"ras": [0, 0, 0]}')])
    outcomes = {}
    for toolset in ("paper", "extended"):
        with FakeModelServer([Scripted(record), Scripted(answer)]) as server:
            flags = ["--toolset", toolset] if toolset == "extended" else []
            assert main(["bench", "run", "--module", "ucsf-pdgm", "--agent", "model", "--model", "fake-vlm",
                         "--base-url", server.url, "--no-preflight", "--cases", str(cases),
                         "--limit", "1", "--out", str(tmp_path / toolset), *flags]) == 0
        assert json.loads((tmp_path / toolset / "run.json").read_text())["toolset"] == toolset
        shown = [tool["function"]["name"] for tool in server.requests[0]["body"]["tools"]]
        assert (set(shown) == VIEWER_TABLE_9) == (toolset == "paper")
        outcomes[toolset] = actions(tmp_path / toolset, episodes(tmp_path / toolset)["UCSF-PDGM-0001__r1"])
    assert "record_point" not in outcomes["paper"] and "record_point" in outcomes["extended"]
    assert main(["bench", "run", "--module", "ucsf-pdgm", "--agent", "replay", "--replay-from",
                 str(tmp_path / "extended"), "--cases", str(cases), "--limit", "1", "--out",
                 str(tmp_path / "replay")]) == 0
    assert json.loads((tmp_path / "replay" / "run.json").read_text())["toolset"] == "extended"
    assert "record_point" in actions(tmp_path / "replay", episodes(tmp_path / "replay")["UCSF-PDGM-0001__r1"])
    capsys.readouterr()

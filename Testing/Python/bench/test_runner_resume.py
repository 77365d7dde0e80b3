"""The batch runner over real headless slicer-core workers: oracle Strict = 1.0, random near chance, a worker
killed mid-episode is replaced and the episode retried, nothing is lost or duplicated, and a second invocation
does no new work."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from agents_cases import write_ucsf_package

from MedOpenClawLib.bench.agents.oracle import OracleAgent
from MedOpenClawLib.bench.agents.random_agent import RandomAgent
from MedOpenClawLib.bench.episode import EpisodePrompt
from MedOpenClawLib.bench.runner import BenchmarkRunner, RunConfig
from MedOpenClawLib.bench.tasks import MAX_REPEATS
from MedOpenClawLib.core.audit import read_trace, verify_trace
from MedOpenClawLib.worker.client import headless_command
from MedOpenClawLib.worker.protocol import TOKEN_ENV

# warm workers where a run's worker survives it; a killed or hung one is still replaced by a fresh start
pytestmark = pytest.mark.usefixtures("warm_workers")


def plain_prompt(spec, case, attachments, max_rounds):
    """Test double of the module prompt: the runner's job is to attach the inventory and views."""
    return EpisodePrompt("You operate a viewer.", f"Case {case.case_id}.\n{attachments.inventory_text}",
                         attachments.images)


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return write_ucsf_package(tmp_path_factory.mktemp("cases"), cases=3)


def runner(cases, out, agent_class=OracleAgent, **options) -> BenchmarkRunner:
    config = RunConfig(module="ucsf-pdgm", agent=agent_class.name, out=out, cases_dir=cases, **options)
    return BenchmarkRunner(config, lambda task: agent_class(), plain_prompt, progress_stream=io.StringIO())


def results(out):
    return {path.parent.name: json.loads(path.read_text()) for path in (out / "episodes").glob("*/result.json")}


class KillingOracle(OracleAgent):
    """Kills its worker process in the middle of its first episode on the marked case (a crash in VTK)."""

    victims: dict = {}

    def step(self, conversation, allow_tools=True):
        victim = self.victims.get(self.context.case.case_id)
        if victim and not victim["killed"] and len(conversation) > 3:
            victim["killed"] = True
            os.kill(victim["runner"].slots[0].worker.pid, signal.SIGKILL)
        return super().step(conversation, allow_tools)


@pytest.fixture(scope="module")
def oracle_run(cases, tmp_path_factory):
    """One oracle run over the three cases, (its folder, its summary): the tests that read it or refuse to resume it
    share it (an oracle run costs about 2 s of CPU)."""
    out = tmp_path_factory.mktemp("oracle") / "run"
    return out, runner(cases, out).run()


def test_oracle_run_is_perfect_and_traces_verify(oracle_run):
    out, summary = oracle_run
    assert summary["n"] == 3 and summary["task"] == 1.0 and summary["strict"] == 1.0 and summary["loc"] == 1.0
    assert summary["invalid"] == 0 and summary["executed_now"] == 3
    for record in results(out).values():
        trace = out / record["trace"]
        assert verify_trace(trace, anchor=record["trace_anchor"]).anchored  # result.json anchors its trace
        assert verify_trace(trace, anchor=record["trace_anchor"]).ok
        kinds = [r.get("action") or r["kind"] for r in read_trace(trace)]
        assert {"open_case", "episode_prompt", "select_volume", "jump", "image_coords_to_ras",
                "tool_receipt", "episode_end"} <= set(kinds)


def test_worker_killed_mid_episode_is_retried_and_resume_does_no_new_work(cases, tmp_path):
    out = tmp_path / "run"
    first = runner(cases, out, KillingOracle, limit=2, repeats=2)
    KillingOracle.victims = {"UCSF-PDGM-0002": {"killed": False, "runner": first}}
    summary = first.run()
    assert KillingOracle.victims["UCSF-PDGM-0002"]["killed"]
    records = results(out)
    assert sorted(records) == ["UCSF-PDGM-0001__r1", "UCSF-PDGM-0001__r2", "UCSF-PDGM-0002__r1",
                               "UCSF-PDGM-0002__r2"]
    retried = [r for r in records.values() if r["attempts"] == 2]
    assert len(retried) == 1 and retried[0]["case_id"] == "UCSF-PDGM-0002" and not retried[0]["invalid"]
    assert len(first.slots[0].started) == 2  # a fresh worker replaced the killed one
    assert summary["strict"] == 1.0 and summary["n"] == 4 and summary["invalid"] == 0
    before = {name: (out / "episodes" / name / "result.json").stat().st_mtime_ns for name in records}
    again = runner(cases, out, KillingOracle, limit=2, repeats=2)
    second = again.run()
    assert again.executed == [] and again.slots[0].started == [] and second["executed_now"] == 0
    assert {k: v for k, v in second.items() if k != "executed_now"} == {
        k: v for k, v in summary.items() if k != "executed_now"}
    assert before == {name: (out / "episodes" / name / "result.json").stat().st_mtime_ns for name in records}


def test_hung_worker_twice_is_invalid_and_excluded(cases, tmp_path):
    """Each attempt's worker is stopped (SIGSTOP) mid-episode and its next tool call times out. The call timeout is
    a few seconds, not one: a loaded machine must not time out the calls before the stop instead (the episode's
    start, where a fresh worker imports Slicer, is bounded by the start-up timeout)."""
    stopped = []

    class HangingOracle(OracleAgent):
        def step(self, conversation, allow_tools=True):
            if len(conversation) > 3:
                stopped.append(hanging.slots[0].worker.pid)
                os.kill(stopped[-1], signal.SIGSTOP)
            return super().step(conversation, allow_tools)

    hanging = runner(cases, tmp_path / "run", HangingOracle, limit=1, call_timeout_s=3.0)
    summary = hanging.run()
    (record,) = results(tmp_path / "run").values()
    assert len(set(stopped)) == 2 and hanging.slots[0].started == stopped  # each attempt's own worker hung
    assert record["attempts"] == 2 and record["invalid"].startswith("environment fault")
    # the request after the stop (not the episode's start) went unanswered, on each attempt
    assert record["invalid"].count("WorkerHung: worker did not answer") == 2 and "'start'" not in record["invalid"]
    assert summary["invalid"] == 1 and summary["n"] == 0


def test_volume_truncated_after_prepare_makes_that_episode_invalid_before_scoring(tmp_path):
    package = write_ucsf_package(tmp_path / "cases", cases=2)
    victim = package / "data" / "UCSF-PDGM-0002" / "UCSF-PDGM-0002_T1c.nii.gz"
    victim.write_bytes(victim.read_bytes()[:200])  # still a NIfTI header: it would load as zeros
    summary = runner(package, tmp_path / "run").run()
    records = {record["case_id"]: record for record in results(tmp_path / "run").values()}
    assert records["UCSF-PDGM-0001"]["invalid"] is None and records["UCSF-PDGM-0001"]["score"]["task"] == 1.0
    broken = records["UCSF-PDGM-0002"]
    assert broken["invalid"].startswith("case package changed") and "UCSF-PDGM-0002_T1c.nii.gz" in broken["invalid"]
    assert "truncated" in broken["invalid"] and broken["attempts"] == 1 and "trace" not in broken
    assert summary["invalid"] == 1 and summary["n"] == 1 and summary["task"] == 1.0


def test_random_agent_scores_near_chance(cases, tmp_path):
    summary = runner(cases, tmp_path / "run", RandomAgent, repeats=2).run()  # seeded: the same six episodes
    assert summary["n"] == 6 and summary["invalid"] == 0
    assert summary["task"] <= 0.5  # six options: chance is 1/6


def test_changed_configuration_is_refused(cases, oracle_run):
    with pytest.raises(ValueError, match="differs in agent"):  # --limit is not part of what a resume must share
        runner(cases, oracle_run[0], RandomAgent, limit=1).run()


@pytest.mark.parametrize("repeats", [0, -1, MAX_REPEATS + 1, 10**9])
def test_repeats_out_of_bounds_are_refused_before_any_task_is_listed(cases, tmp_path, repeats):
    """Every (case, repeat) task is listed up front: a huge count would exhaust memory before anything ran."""
    with pytest.raises(ValueError, match=f"repeats must be from 1 to {MAX_REPEATS}"):
        runner(cases, tmp_path / "run", repeats=repeats)
    assert not (tmp_path / "run").exists()


def test_worker_exits_when_its_runner_is_killed(tmp_path):
    """A runner killed with SIGKILL cannot close its workers: they must not live on as orphans."""
    runner_stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ready = tmp_path / "ready.json"
    command = headless_command(str(ready))
    assert command[-2:] == ["--parent-pid", str(os.getpid())]
    command[-1] = str(runner_stand_in.pid)
    worker = subprocess.Popen(command, env={**os.environ, TOKEN_ENV: "t"})
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists() and worker.poll() is None
        runner_stand_in.kill()
        runner_stand_in.wait()
        assert worker.wait(timeout=10) == 3
    finally:
        runner_stand_in.kill()
        worker.kill()
        worker.wait()

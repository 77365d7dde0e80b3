"""`bench run --agent model` against a fake OpenAI-compatible server on 127.0.0.1: rate limits are absorbed,
a provider outage leaves episodes in *error* (not INVALID) that the same command re-runs, a rejected key or an
unreachable URL fails in seconds before any worker starts, `--fail-on-error` stops early, the exit status is
non-zero while errors remain, and the progress line agrees with summary.json."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from agents_cases import write_ucsf_package
from agents_fakes import FakeModelServer, Scripted, anthropic_reply, openai_reply

from MedOpenClawLib.bench.agents.oracle import OracleAgent
from MedOpenClawLib.bench.cases import Case
from MedOpenClawLib.bench.episode import EpisodeOutcome
from MedOpenClawLib.bench.outcomes import ErrorPolicy, Tally, exit_status, parse_fail_on_error
from MedOpenClawLib.bench.preload import module_prompt
from MedOpenClawLib.bench.progress import Progress
from MedOpenClawLib.bench.runner import BenchmarkRunner, RunConfig
from MedOpenClawLib.bench.tasks import EpisodeTask
from MedOpenClawLib.cli import main
from MedOpenClawLib.providers.messages import Usage

ANSWER = Scripted(openai_reply("ANSWER: glioblastoma"))
# Retry-After 0: the same retries without their backoff (4-6 s of sleeping); the backoff itself is
# providers/test_providers_http.py's subject
OUTAGE = Scripted({"error": {"message": "upstream overloaded"}}, 500, headers={"Retry-After": "0"})
PREFLIGHT = Scripted(openai_reply(calls=[("report_colour", '{"colour": "red"}')]))  # one image, one tool: called
REPO = Path(__file__).resolve().parents[3]
# the in-process runs take warm workers: what they test happens around the episode, not in a worker's start
pytestmark = pytest.mark.usefixtures("warm_workers")


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return write_ucsf_package(tmp_path_factory.mktemp("cases"), cases=2)


def bench_run(cases, out, url, *extra) -> list[str]:
    return ["bench", "run", "--module", "ucsf-pdgm", "--agent", "model", "--provider", "openai", "--model", "m",
            "--base-url", url, "--cases", str(cases), "--out", str(out), "--max-retries", "1",
            "--retry-deadline", "5", *extra]


def run_cli(argv, capsys) -> tuple[int, dict | None, str]:
    code = main(argv)
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    return code, json.loads(lines[-1]) if lines else None, captured.err


def last_progress(stderr: str) -> str:
    return [line for line in stderr.splitlines() if line.startswith("[")][-1]


PRICES = {"m": {"input": 3.0, "output": 15.0, "cached_input": 0.3, "cache_write": 3.75}}
COSTS = {"openai": (100 * 3.0 + 10 * 15.0) / 1e6, "anthropic": (120 * 3.0 + 80 * 3.75 + 12 * 15.0) / 1e6}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_rate_limits_with_retry_after_are_absorbed_and_costs_reported(provider, cases, tmp_path, capsys,
                                                                       monkeypatch):
    monkeypatch.setenv("MEDOPENCLAW_API_KEY", "k")
    (tmp_path / "prices.json").write_text(json.dumps(PRICES))
    # Retry-After 0, "retry at once", not 1: the same two retries, 2 s less waiting per provider
    limited = [Scripted({"error": {"message": "slow down"}}, 429, headers={"Retry-After": "0"})] * 2
    answer = ANSWER if provider == "openai" else Scripted(anthropic_reply("ANSWER: glioblastoma"))
    with FakeModelServer(limited, fallback=answer) as server:
        argv = bench_run(cases, tmp_path / "run", server.url, "--limit", "1", "--no-preflight", "--max-retries",
                         "3", "--provider", provider, "--prices", str(tmp_path / "prices.json"))
        code, summary, _ = run_cli(argv, capsys)
    assert code == 0 and (summary["scored"], summary["errors"], summary["invalid"]) == (1, 0, 0)
    assert summary["usage"]["retries"] == 2 and summary["usage"]["calls"] == 1
    assert summary["cost_usd"] == pytest.approx(COSTS[provider], abs=1e-6)
    record = json.loads(next((tmp_path / "run").rglob("result.json")).read_text())
    assert record["outcome"]["usage"]["cost_usd"] == pytest.approx(COSTS[provider], abs=1e-6)
    assert record["outcome"]["usage"]["model_seconds"] > 0


def test_outage_leaves_errors_that_the_same_command_reruns(cases, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MEDOPENCLAW_API_KEY", "k")
    out = tmp_path / "run"
    with FakeModelServer([], fallback=OUTAGE) as server:
        argv = bench_run(cases, out, server.url)
        code, summary, stderr = run_cli(argv, capsys)
        port = server.httpd.server_address[1]
    assert code == 1 and "server is busy" in stderr  # the pre-flight saw the outage and let the run start
    assert (summary["scored"], summary["errors"], summary["invalid"], summary["n"]) == (0, 2, 0, 0)
    assert "upstream overloaded" in summary["error_episodes"][0]["message"]
    assert summary["error_episodes"][0]["retryable"] and not summary["error_episodes"][0]["fatal"]
    assert last_progress(stderr).split(" | ")[0].endswith("invalid 0 errors 2") and "to resume" in stderr
    episode = out / "episodes" / "UCSF-PDGM-0001__r1"
    assert (episode / "error.json").exists() and not (episode / "result.json").exists()
    assert json.loads((out / "summary.json").read_text())["errors"] == 2

    with FakeModelServer([PREFLIGHT], fallback=ANSWER, port=port):  # the outage is over: the same command again
        code, summary, stderr = run_cli(argv, capsys)
    assert code == 0, stderr
    assert (summary["scored"], summary["errors"], summary["invalid"], summary["n"]) == (2, 0, 0, 2)
    assert summary["executed_now"] == 2 and "resuming" in stderr
    assert not (episode / "error.json").exists()
    record = json.loads((episode / "result.json").read_text())
    assert record["attempts"] == 2 and record["trace"].endswith("trace-2.jsonl")
    assert (episode / "trace-1.jsonl").exists()  # the errored attempt's trace is kept
    assert record["usage_all_attempts"]["calls"] == 1
    progress = last_progress(stderr)
    assert progress.startswith("[" + "#" * 24 + "] 2/2") and "invalid 0 errors 0" in progress


def test_rejected_key_stops_the_run_with_one_line(cases, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MEDOPENCLAW_API_KEY", "wrong")
    refused = Scripted({"error": {"message": "Incorrect API key provided"}}, 401)
    with FakeModelServer([], fallback=refused) as server:
        code, summary, stderr = run_cli(bench_run(cases, tmp_path / "run", server.url, "--no-preflight"), capsys)
    assert code == 1 and summary["errors"] == 1 and summary["missing"] == 1 and summary["scored"] == 0
    assert "API key was refused" in summary["stopped"] and "Traceback" not in stderr
    assert [line for line in stderr.splitlines() if line.startswith("error:")] == [
        f"error: run stopped: {summary['stopped']}"]


def test_fail_on_error_count_stops_starting_episodes(cases, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MEDOPENCLAW_API_KEY", "k")
    with FakeModelServer([], fallback=OUTAGE) as server:
        argv = bench_run(cases, tmp_path / "run", server.url, "--no-preflight", "--fail-on-error", "1")
        code, summary, _ = run_cli(argv, capsys)
    assert code == 1 and summary["errors"] == 1 and summary["missing"] == 1
    assert summary["stopped"] == "1 episodes ended in error (--fail-on-error 1)"


def test_preflight_fails_fast_before_any_worker(cases, tmp_path, capsys, monkeypatch):
    for name in ("MEDOPENCLAW_API_KEY", "MEDOPENCLAW_BASE_URL", "MEDOPENCLAW_PROVIDER", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "run"
    argv = ["bench", "run", "--module", "ucsf-pdgm", "--agent", "model", "--model", "gpt-4o", "--cases", str(cases),
            "--out", str(out)]
    started = time.monotonic()
    code, summary, stderr = run_cli(argv, capsys)
    assert code == 2 and summary is None and stderr.strip().splitlines() == [
        "error: model pre-flight failed: no API key for https://api.openai.com/v1: set MEDOPENCLAW_API_KEY or "
        "OPENAI_API_KEY"]
    monkeypatch.setenv("MEDOPENCLAW_API_KEY", "k")
    code, summary, stderr = run_cli(bench_run(cases, out, "http://127.0.0.1:9/v1"), capsys)
    assert code == 2 and "connection failed" in stderr and len(stderr.strip().splitlines()) == 1
    with FakeModelServer([Scripted({"error": {"message": "The model `m` does not exist"}}, 404)]) as server:
        code, _, stderr = run_cli(bench_run(cases, out, server.url), capsys)
    assert code == 2 and "unknown model" in stderr
    assert time.monotonic() - started < 30 and not (out / "workers").exists()


def test_error_policy_thresholds_and_exit_status():
    assert parse_fail_on_error("3") == 3 and parse_fail_on_error("0.25") == 0.25
    for bad in ("0", "1.5", "-1", "x"):
        with pytest.raises(ValueError):
            parse_fail_on_error(bad)
    tally = Tally(10, {"stale": {"error": {"message": "HTTP 500", "fatal": False}}})  # left by an earlier run
    policy = ErrorPolicy(0.2)
    for index in range(3):
        record = {"error": {"message": "HTTP 500", "fatal": False}}
        tally.record(f"e{index}", record)
        reason = policy.observe(record, tally)
        assert reason is None or index == 2
    assert reason == "3 of 10 episodes ended in error (--fail-on-error 0.2)"
    assert exit_status({"errors": 0, "missing": 0}) == 0 and exit_status({"errors": 1, "missing": 0}) == 1
    assert exit_status({"errors": 0, "missing": 0, "interrupted": True}) == 130


def test_terminal_progress_shows_the_running_episode(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setenv("COLUMNS", "200")
    stream = Terminal()
    progress = Progress(Tally(4), stream, max_rounds=20)
    outcome = EpisodeOutcome(status="completed", final_text=None, rounds=2)
    outcome.usage.add(Usage(input_tokens=1500, output_tokens=30))
    task = EpisodeTask(Case(module="ucsf-pdgm", case_id="C-1", data_dir="cases/C-1", open_paths=[]), 1)
    progress.episode(task, outcome, "jump, observe")
    line = stream.getvalue().rsplit("\r\x1b[2K", 1)[-1]
    assert line.endswith("| C-1__r1 round 2/20 jump, observe tokens 1.5k in/30 out")
    assert "0/4" in line and "invalid 0 errors 0" in line
    offline = EpisodeOutcome(status="completed", final_text=None, rounds=1)  # no model call: no token counts
    progress.episode(task, offline, "jump")
    assert stream.getvalue().rsplit("\r\x1b[2K", 1)[-1].endswith("| C-1__r1 round 1/20 jump")
    monkeypatch.setenv("COLUMNS", "80")  # the line is cut to the terminal's width: it never wraps and stacks
    progress.episode(task, outcome, "jump, observe")
    line = stream.getvalue().rsplit("\r\x1b[2K", 1)[-1]
    assert len(line) < 80 and line.endswith("…") and line.startswith("[")


def _start_run(argv, stderr_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "MedOpenClaw"), str(REPO / "MedCopilot")]),
           "MEDOPENCLAW_API_KEY": "k"}
    with open(stderr_path, "w") as stderr:
        return subprocess.Popen([sys.executable, "-m", "MedOpenClawLib.cli", *argv], stdout=subprocess.PIPE,
                                stderr=stderr, env=env, text=True)


def _wait_for(path: Path, text: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in path.read_text():
        assert time.monotonic() < deadline, path.read_text()
        time.sleep(0.1)


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_writes_the_summary_and_says_how_to_resume(cases, tmp_path, presses):
    """One Ctrl-C lets the running episode finish; two stop at once. Either way: summary.json, exit 130, a
    resume hint and no traceback. The model's reply is held until the run has said what the Ctrl-Cs did, so
    each press lands while the episode waits for it (no fixed delay to outlast)."""
    out = tmp_path / "run"
    held = Scripted(openai_reply("ANSWER: glioblastoma"), hold=threading.Event())
    with FakeModelServer([], fallback=held) as server:
        log = tmp_path / "stderr.txt"
        try:
            process = _start_run(bench_run(cases, out, server.url, "--no-preflight"), log)
            _wait_for(log, "starting")
            while not server.requests:
                time.sleep(0.05)
            process.send_signal(signal.SIGINT)
            _wait_for(log, "interrupted: finishing")
            if presses == 2:
                process.send_signal(signal.SIGINT)
                _wait_for(log, "interrupted again")
        finally:
            held.hold.set()
        stdout, _ = process.communicate(timeout=60)
    stderr = log.read_text()
    assert process.returncode == 130 and "Traceback" not in stderr and "to resume, run medopenclaw bench run" in stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] and json.loads(stdout.strip().splitlines()[-1]) == summary
    assert summary["scored"] == (1 if presses == 1 else 0) and summary["missing"] == (1 if presses == 1 else 2)
    # one worker: one episode was running when Ctrl-C came, the other had not started
    assert "finishing 1 running episode (1 not started are left for a resume)" in stderr


def test_a_harness_failure_still_writes_the_summary_of_what_finished(cases, tmp_path):
    def make_agent(task):
        if task.case.case_id == "UCSF-PDGM-0002":
            raise RuntimeError("agent factory bug")
        return OracleAgent()

    config = RunConfig(module="ucsf-pdgm", agent="oracle", out=tmp_path / "run", cases_dir=cases)
    runner = BenchmarkRunner(config, make_agent, module_prompt, progress_stream=io.StringIO())
    with pytest.raises(RuntimeError, match="agent factory bug"):
        runner.run()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["scored"], summary["missing"], summary["errors"]) == (1, 1, 0)


def test_a_deterministic_rejection_is_final_exits_non_zero_once_and_reruns_on_request(cases, tmp_path, capsys,
                                                                                        monkeypatch):
    """A 4xx that is neither a rate limit nor a length limit is the same on every attempt: recorded as *rejected*,
    the invocation exits 1, a resume neither re-runs it nor fails again; --rerun-rejected runs it once more."""
    monkeypatch.setenv("MEDOPENCLAW_API_KEY", "k")
    out = tmp_path / "run"
    refused = Scripted({"error": {"message": "Invalid 'messages[1].content': unsupported part"}}, 400)
    with FakeModelServer([PREFLIGHT], fallback=refused) as server:
        argv = bench_run(cases, out, server.url, "--limit", "1")
        code, summary, stderr = run_cli(argv, capsys)
        assert code == 1 and (summary["rejected"], summary["rejected_now"], summary["errors"]) == (1, 1, 0)
        assert "unsupported part" in summary["rejected_episodes"][0]["message"] and "--rerun-rejected" in stderr
        assert (summary["n"], summary["task"], summary["strict"]) == (1, 0.0, 0.0)  # model-side: 0 within n
        requests = len(server.requests)
        server.script.append(PREFLIGHT)
        code, summary, stderr = run_cli(argv, capsys)
        assert code == 0 and summary["rejected"] == 1 and summary["rejected_now"] == 0, stderr
        assert len(server.requests) == requests + 1  # the pre-flight only: nothing was re-run
        server.script.append(PREFLIGHT)
        server.fallback = ANSWER
        code, summary, _ = run_cli(argv + ["--rerun-rejected"], capsys)
    assert code == 0 and (summary["scored"], summary["rejected"]) == (1, 0)

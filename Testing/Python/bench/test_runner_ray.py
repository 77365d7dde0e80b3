"""``bench run --executor ray`` on a real two-node Ray cluster on this machine (a head and a second node process):
oracle episodes score exactly as with the local pool, traces come home to ``--out``, an actor killed
mid-episode is retried on a fresh one with nothing lost or duplicated, and case files travel to nodes that
lack them. Skipped when Ray (the ``ray`` extra) is not installed.

At most one Ray driver session per process: Ray does not support restarting a driver in one process robustly
(ray-project/ray#31145, a segfault at exit once seen in CI). The two-node run is ``bench run --executor ray`` as a
user types it, in a process of its own; the other runs (hooks inside the run, or none needed) share this process's
one session (``driver``), which :class:`RayExecutor` joins without opening or closing it."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import sys
import time

import pytest
from agents_cases import write_ucsf_package
from console_script import run_console

from MedOpenClawLib.bench.agents.oracle import OracleAgent
from MedOpenClawLib.bench.preload import module_prompt
from MedOpenClawLib.bench.ray_actor import WorkerHost, pack_tree, tree_records
from MedOpenClawLib.bench.ray_executor import RayExecutor
from MedOpenClawLib.bench.runner import BenchmarkRunner, RunConfig
from MedOpenClawLib.cli import main
from MedOpenClawLib.core.audit import verify_trace

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

# one actor per node for offline agents; no test reads the workers' output through Ray (traces and worker logs
# come back through the runner), so no node runs Ray's log monitor (~1.4 s of CPU each)
NODE = {"num_cpus": 1, "object_store_memory": 80 << 20, "include_log_monitor": False}
SLICER_NODE = {**NODE, "resources": {"slicer": 1}}  # the second node "has 3D Slicer"
# nothing autoscales a fixed test cluster: the head runs no autoscaler monitor (~1.3 s of CPU)
HEAD_NODE = {**NODE, "include_dashboard": False, "no_monitor": True}


@pytest.fixture(scope="module")
def cluster():
    # the machine's own address: Ray rewrites a 127.0.0.1 bootstrap address to it when a driver connects
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args=HEAD_NODE)
    cluster.add_node(**SLICER_NODE)
    try:
        yield cluster
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


@pytest.fixture()
def two_nodes(cluster):
    """The module's cluster with its second (slicer) node: a test that loses that node leaves the adding back to the
    next test that needs it, so the last test (the node lost) starts no node that nothing would use."""
    if not cluster.worker_nodes:
        cluster.add_node(**SLICER_NODE)
    return cluster


@pytest.fixture(scope="module")
def driver(cluster):
    """This process's one Ray driver session on the cluster (closed with the cluster), for runs with hooks inside."""
    ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
    return cluster


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return write_ucsf_package(tmp_path_factory.mktemp("cases"), cases=3)


def episode_results(out):
    return {path.parent.name: json.loads(path.read_text()) for path in (out / "episodes").glob("*/result.json")}


def cli_run(cases, cwd, out: str, *extra) -> dict:
    """``medopenclaw bench run`` typed in ``cwd`` with relative paths; its summary line."""
    completed = run_console(cwd, "bench", "run", "--module", "ucsf-pdgm", "--agent", "oracle", "--cases",
                            os.path.relpath(cases, cwd), "--workers", "2", "--out", out, *extra)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.mark.usefixtures("warm_workers")
def test_oracle_on_two_nodes_scores_exactly_like_the_local_pool(two_nodes, cases, tmp_path, capsys):
    # the reference, run in this process on one (warm) local worker: neither changes a score, a trace or the summary
    assert main(["bench", "run", "--module", "ucsf-pdgm", "--agent", "oracle", "--cases", str(cases), "--workers",
                 "1", "--out", str(tmp_path / "local")]) == 0
    local = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    distributed = cli_run(cases, tmp_path, "ray", "--executor", "ray", "--ray-address", two_nodes.address)
    assert distributed == local and local["n"] == 3 and local["strict"] == 1.0
    local_records, ray_records = episode_results(tmp_path / "local"), episode_results(tmp_path / "ray")
    assert sorted(ray_records) == sorted(local_records)
    for name, record in ray_records.items():
        assert record["score"] == local_records[name]["score"] and record["attempts"] == 1
        assert record["trace"] == local_records[name]["trace"]
        trace = tmp_path / "ray" / record["trace"]
        assert verify_trace(trace).ok  # written on a node, streamed back, intact
        assert list(trace.parent.glob("trace-1_images/*.png"))
    assert (tmp_path / "ray" / "workers" / "w0" / "worker.log").exists()


def test_an_unreachable_cluster_is_a_usage_error_before_anything_is_written(cases, tmp_path, capsys):
    """In this process: the address is refused before any driver session starts."""
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{unused.getsockname()[1]}"
    code = main(["bench", "run", "--module", "ucsf-pdgm", "--agent", "oracle", "--cases", str(cases),
                 "--executor", "ray", "--ray-address", address, "--out", str(tmp_path / "run")])
    assert code == 2 and "cannot reach the Ray cluster" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def slicer_launcher(tmp_path_factory):
    """Stand-in for the 3D Slicer launcher's command line as the runner uses it (``--no-main-window
    --python-script FILE ARGS...``, options of Slicer's Base/QTCore/qSlicerCoreCommandOptions.cpp): it runs
    the package's worker/scripts/run_bench.py with this Python, where slicer-core provides ``import slicer``."""
    path = tmp_path_factory.mktemp("slicer") / "Slicer"
    path.write_text(f'#!/bin/sh\n[ "$1" = --no-main-window ] && [ "$2" = --python-script ] || exit 64\n'
                    f'shift 2\necho "stand-in Slicer runs $1" >&2\nexec {sys.executable} "$@"\n')
    path.chmod(0o755)
    return path


@pytest.mark.usefixtures("driver")
def test_slicer_workers_run_only_on_nodes_that_have_slicer(two_nodes, cases, tmp_path, slicer_launcher, capsys):
    """``bench run`` through ``cli.main`` in this process's session: a process of its own (the two-node test's) would
    cost 1.5 s of CPU more."""
    assert main(["bench", "run", "--module", "ucsf-pdgm", "--agent", "oracle", "--cases", str(cases), "--workers",
                 "2", "--out", str(tmp_path / "run"), "--executor", "ray", "--ray-address", two_nodes.address,
                 "--slicer", str(slicer_launcher), "--limit", "1"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["n"] == 1 and summary["strict"] == 1.0
    (record,) = episode_results(tmp_path / "run").values()
    slicer_node = next(node for node in two_nodes.worker_nodes)
    assert record["worker_node"].endswith(slicer_node.node_id)
    log = (tmp_path / "run" / "workers" / "w0" / "worker.log").read_text()  # came back from the node
    assert "stand-in Slicer runs" in log and "run_bench.py" in log


class ActorKillingOracle(OracleAgent):
    """SIGKILLs the Ray actor hosting its viewer in the middle of the marked case's first episode."""

    victim: dict = {}

    def step(self, conversation, allow_tools=True):
        victim = self.victim
        if self.context.case.case_id == victim.get("case") and not victim.get("killed") and len(conversation) > 3:
            victim["killed"] = True
            worker = next(slot.worker for slot in victim["runner"].slots if slot.worker and
                          slot.worker.episode_dir and self.context.case.case_id in slot.worker.episode_dir)
            victim["node_id"] = worker.info["node_id"]
            os.kill(worker.info["actor_pid"], signal.SIGKILL)
        return super().step(conversation, allow_tools)


@pytest.mark.usefixtures("two_nodes")
def test_actor_killed_mid_episode_is_retried_nothing_lost_or_duplicated(driver, cases, tmp_path):
    def runner():
        config = RunConfig(module="ucsf-pdgm", agent="oracle", out=tmp_path / "run", cases_dir=cases, workers=2,
                           repeats=2)
        return BenchmarkRunner(config, lambda task: ActorKillingOracle(), module_prompt,
                               progress_stream=io.StringIO(),
                               make_executor=lambda job, config, on_round: RayExecutor(job, on_round, driver.address))

    first = runner()
    ActorKillingOracle.victim = {"case": "UCSF-PDGM-0002", "runner": first}
    summary = first.run()
    assert ActorKillingOracle.victim["killed"]
    records = episode_results(tmp_path / "run")
    assert len(records) == 6 and summary["n"] == 6 and summary["strict"] == 1.0 and summary["invalid"] == 0
    retried = [record for record in records.values() if record["attempts"] == 2]
    assert len(retried) == 1 and retried[0]["case_id"] == "UCSF-PDGM-0002"
    assert verify_trace(tmp_path / "run" / retried[0]["trace"]).ok
    assert sum(len(slot.started) for slot in first.slots) == 3  # two actors, one replacement

    again = runner()
    second = again.run()
    assert again.executed == [] and second["executed_now"] == 0
    assert {k: v for k, v in second.items() if k != "executed_now"} == {
        k: v for k, v in summary.items() if k != "executed_now"}


def test_case_files_reach_a_node_that_lacks_them(cases, tmp_path):
    """The actor body, in this process: a data root missing on the node is written at the same path from the
    object-store payload; matching files are used as they are, different ones are refused."""
    source = cases / "data" / "UCSF-PDGM-0001"
    records = tree_records(source)
    host = WorkerHost(None, 30.0, 30.0)
    try:
        target = tmp_path / "node" / "data" / "UCSF-PDGM-0001"
        assert host.case_status(str(target), records) == "missing"
        assert host.put_case(str(target), records, pack_tree(source)) == {"status": "ok"}
        assert host.case_status(str(target), records) == "present" and tree_records(target) == records
        assert host.case_status(str(source), records) == "present"
        next(target.iterdir()).write_bytes(b"changed")
        assert host.case_status(str(target), records) == "different"
        corrupted = {**pack_tree(source), "extra.txt": b"x"}
        answer = host.put_case(str(tmp_path / "other"), records, corrupted)
        assert answer["status"] == "fault" and "corrupted" in answer["message"]
        escaping = host.put_case(str(tmp_path / "third"), records, {"../escape.txt": b"x"})
        assert escaping["status"] == "fault" and not (tmp_path / "escape.txt").exists()
    finally:
        host.close()


class NodeRemovingOracle(OracleAgent):
    """Removes the second node of the cluster (its raylet and every process on it) in the middle of the first
    episode that runs there."""

    scenario: dict = {}

    def step(self, conversation, allow_tools=True):
        plan = self.scenario
        if not plan.get("removed") and len(conversation) > 3:
            worker = next((slot.worker for slot in plan["runner"].slots if slot.worker and slot.worker.episode_dir
                           and self.context.case.case_id in slot.worker.episode_dir), None)
            if worker is not None and worker.info["node_id"] == plan["node"].node_id:
                plan["removed"] = self.context.case.case_id
                plan["cluster"].remove_node(plan["node"], allow_graceful=False)
        return super().step(conversation, allow_tools)


def wait_until_idle(timeout_s: float = 60.0) -> None:
    """Until the earlier tests' actors have given their CPUs back: this test's second slot must be placed on the
    second node within its short placement timeout, or no episode would run where the node is removed."""
    deadline = time.monotonic() + timeout_s
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources()["CPU"]:
        assert time.monotonic() < deadline, f"the cluster stayed busy: {ray.available_resources()}"
        time.sleep(0.2)


@pytest.mark.usefixtures("two_nodes")
def test_node_lost_mid_episode_its_episode_runs_elsewhere(driver, cases, tmp_path):
    """Losing a node mid-episode costs neither the episode nor the run: it is retried on the surviving node, and
    the slot that can no longer be placed gives way instead of burning the episode's attempts."""
    cluster = driver
    node = next(node for node in cluster.worker_nodes)
    wait_until_idle()
    config = RunConfig(module="ucsf-pdgm", agent="oracle", out=tmp_path / "run", cases_dir=cases, workers=2)
    runner = BenchmarkRunner(config, lambda task: NodeRemovingOracle(), module_prompt, progress_stream=io.StringIO(),
                             make_executor=lambda job, config, on_round: RayExecutor(
                                 job, on_round, cluster.address, placement_timeout_s=2.0))
    NodeRemovingOracle.scenario = {"runner": runner, "cluster": cluster, "node": node}
    summary = runner.run()
    assert NodeRemovingOracle.scenario.get("removed")
    records = episode_results(tmp_path / "run")
    assert sorted(records) == ["UCSF-PDGM-0001__r1", "UCSF-PDGM-0002__r1", "UCSF-PDGM-0003__r1"]
    assert summary["n"] == 3 and summary["strict"] == 1.0 and summary["invalid"] == 0 and summary["missing"] == 0
    for record in records.values():
        assert verify_trace(tmp_path / "run" / record["trace"]).ok

"""RayExecutor never leaves its Ray session while one of its own threads is still inside the Ray API: shutting Ray
down under a running call can crash the process (ray-project/ray#31145). An abort kills the actors, waits -- bounded --
for the slot threads to leave their calls, and only then disconnects; a thread that cannot leave keeps the session
open for Ray's exit handler. Driven through a double of the Ray driver API that records the order of calls."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from MedOpenClawLib.bench.cases import Case
from MedOpenClawLib.bench.executors import EpisodeJob, record
from MedOpenClawLib.bench.ray_actor import RESULT_OK
from MedOpenClawLib.bench.ray_executor import RayExecutor
from MedOpenClawLib.bench.tasks import EpisodeTask, RunConfig


class RayActorError(Exception):
    """ray.exceptions.RayActorError: what ``ray.get`` raises once the actor's death is known."""


class GetTimeoutError(Exception):
    """ray.exceptions.GetTimeoutError."""


class RayApiDouble:
    """The driver API the executor uses (ray/_private/worker.py: init, shutdown, get, kill, put, cluster_resources;
    ray/util/placement_group.py; actor handles' ``method.remote``), recording ``(enter|exit, call)`` in order.

    With ``hold_requests``, ``get`` on an episode request blocks like one on a long model round: until the actor
    is killed, and it fails only once the death is noticed (``death_noticed``: the raylet reports it to the waiting
    driver some time after the kill). Any call after ``shutdown`` fails (the real one may crash instead)."""

    def __init__(self, initialized: bool = False, hold_requests: bool = True):
        self.calls: list[tuple[str, str]] = []
        self.initialized = initialized
        self.hold_requests = hold_requests
        self.killed = threading.Event()
        self.death_noticed = threading.Event()
        self._lock = threading.Lock()

    def _log(self, phase: str, name: str) -> None:
        with self._lock:
            self.calls.append((phase, name))
        if phase == "enter" and name not in ("init", "is_initialized") and not self.initialized:
            raise RuntimeError(f"ray.{name} called without a Ray session")

    def module(self) -> dict[str, types.ModuleType]:
        api = self
        ray, exceptions = types.ModuleType("ray"), types.ModuleType("ray.exceptions")
        groups = types.ModuleType("ray.util.placement_group")
        strategies = types.ModuleType("ray.util.scheduling_strategies")
        exceptions.RayActorError, exceptions.GetTimeoutError = RayActorError, GetTimeoutError

        def init(**options):
            api._log("enter", "init")
            api.initialized = True

        def shutdown():
            api._log("enter", "shutdown")
            api.initialized = False

        def get(reference, timeout=None):
            api._log("enter", "get")
            try:
                if reference == "request" and api.hold_requests:
                    api.killed.wait()
                    api.death_noticed.wait()
                    raise RayActorError("The actor died unexpectedly before finishing this task.")
                return {"start": {"status": RESULT_OK, "pid": 11, "node": "n", "node_id": "x"},
                        "request": {"status": RESULT_OK, "result": {}}, "worker_log": b""}.get(reference)
            finally:
                api._log("exit", "get")

        def kill(actor, no_restart=True):
            api._log("enter", "kill")
            api.killed.set()

        class Method:
            def __init__(self, name):
                self.name = name

            def remote(self, *args):
                api._log("enter", f"{self.name}.remote")
                return self.name

        class Actor:
            def __getattr__(self, name):
                return Method(name)

        class ActorClass:
            def options(self, **options):
                return self

            def remote(self, *args):
                api._log("enter", "actor.remote")
                return Actor()

        class PlacementGroup:
            def ready(self):
                return "ready"

        def placement_group(bundles):
            api._log("enter", "placement_group")
            return PlacementGroup()

        def remove_placement_group(group):
            api._log("enter", "remove_placement_group")

        ray.init, ray.shutdown, ray.get, ray.kill = init, shutdown, get, kill
        ray.is_initialized = lambda: api.initialized
        ray.cluster_resources = lambda: {"CPU": 2.0, "memory": 64.0 * (1 << 30)}
        ray.remote = lambda cls: ActorClass()
        ray.exceptions = exceptions
        groups.placement_group, groups.remove_placement_group = placement_group, remove_placement_group
        strategies.PlacementGroupSchedulingStrategy = lambda group: group
        util = types.ModuleType("ray.util")
        util.placement_group, util.scheduling_strategies = groups, strategies
        ray.util = util
        return {"ray": ray, "ray.exceptions": exceptions, "ray.util": util, "ray.util.placement_group": groups,
                "ray.util.scheduling_strategies": strategies}

    def after(self, name: str) -> list[tuple[str, str]]:
        """The calls recorded after the first ``name``."""
        index = self.calls.index(("enter", name))
        return self.calls[index + 1:]


class RequestJob(EpisodeJob):
    """The real job's attempt loop and error policy; an attempt is one episode request to the worker."""

    def attempt(self, worker, task, attempt, on_round=None):
        worker.request("ping")
        return record(task, attempt, response="ok", invalid=None)


def executor(api: RayApiDouble, monkeypatch, tmp_path, **options) -> RayExecutor:
    for name, module in api.module().items():
        monkeypatch.setitem(sys.modules, name, module)
    config = RunConfig(module="ucsf-pdgm", agent="oracle", out=tmp_path / "run", cases_dir=tmp_path, workers=2)
    return RayExecutor(RequestJob(config, None, None), **options)


def tasks(count: int) -> list[EpisodeTask]:
    return [EpisodeTask(Case("ucsf-pdgm", f"C{index}", "data", []), repeat=1) for index in range(count)]


def handed_back(pool: RayExecutor, count: int) -> list[dict]:
    """The records the slot threads hand back after an abort (the runner no longer takes them); taking them
    lets the threads end."""
    records = [pool.next_result(30.0)[1] for _ in range(count)]
    pool.next_result(0.0)  # releases the last one
    for thread in pool._threads:
        thread.join(30.0)
        assert not thread.is_alive()
    return records


def test_abort_disconnects_only_after_every_thread_left_its_ray_call(monkeypatch, tmp_path):
    api = RayApiDouble()
    pool = executor(api, monkeypatch, tmp_path)
    pool.submit(tasks(2))
    while sum(call == ("enter", "request.remote") for call in api.calls) < 2:  # both threads wait on an episode
        api.killed.wait(0.01)
    threading.Timer(0.2, api.death_noticed.set).start()
    pool.abort()
    assert api.calls[-1] == ("enter", "shutdown") and not api.initialized
    inside = sum(+1 if phase == "enter" else -1 for phase, name in api.calls if name == "get")
    assert inside == 0  # every get had returned before the shutdown
    assert pool.outstanding() == 0
    assert all("the run was stopped" in result["invalid"] for result in handed_back(pool, 2))
    assert api.calls[-1] == ("enter", "shutdown")


def test_a_thread_stuck_in_a_ray_call_keeps_the_session_for_rays_exit_handler(monkeypatch, tmp_path):
    api = RayApiDouble()
    pool = executor(api, monkeypatch, tmp_path, abort_wait_s=0.3)
    pool.submit(tasks(1))
    while ("enter", "request.remote") not in api.calls:
        api.killed.wait(0.01)
    pool.abort()  # the actor is killed, but its death is never noticed within the wait
    assert ("enter", "shutdown") not in api.calls and api.initialized
    aborted_at = len(api.calls)
    api.death_noticed.set()  # the call fails late: the thread ends without another Ray call
    assert "the run was stopped" in handed_back(pool, 1)[0]["invalid"]
    assert [call for call in api.calls[aborted_at:] if call[0] == "enter"] == []  # no new Ray call after the abort


@pytest.mark.parametrize("joined", [False, True])
def test_close_leaves_only_a_session_the_executor_opened(monkeypatch, tmp_path, joined):
    api = RayApiDouble(initialized=joined, hold_requests=False)
    pool = executor(api, monkeypatch, tmp_path)
    assert (("enter", "init") in api.calls) is not joined
    pool.submit(tasks(2))
    results = [pool.next_result(30.0) for _ in range(2)]
    assert all(result is not None for result in results)
    pool.close()
    assert (api.calls[-1] == ("enter", "shutdown")) is not joined and api.initialized is joined

"""Benchmark episodes on a Ray cluster (``bench run --executor ray``): each Ray actor hosts one viewer worker.

What runs where -- the driver (the ``bench run`` process) keeps everything that defines a run: the agent and its
model calls (API keys never leave it), the ground truth (the hidden root never leaves it), scoring, the error policy
and ``--out``, which it alone writes. A node only hosts viewers: an actor (:class:`~.ray_actor.WorkerHost`) starts
the same worker process as the local pool (headless slicer-core, or ``--slicer``) on its node and forwards the
episode's requests to it, so a native crash of the viewer is still contained in that process. Each tool call is one
actor call; a tool round costs model seconds, the hop costs about a millisecond.

Files -- no shared filesystem is needed:

- *traces*: the worker writes an attempt's audit trace (and its images) in the actor's node-local scratch
  directory; when the episode ends, or the attempt fails while the actor still lives, the files stream back
  and the driver writes them under ``--out`` at the same relative path as the local pool.
- *case packages*: the agent-visible files of a case (its data root, never ``hidden/``) travel through Ray's
  object store when a node lacks them and are written on the node **at the same absolute path** as on the
  driver, so the data-root policy, the trace and ``replay`` see exactly the paths of a local run. A node that
  already holds the files there (a shared path, or the driver's own machine) is used as it is once their
  digest matches; different files at that path are an environment fault. Nothing is put in the object store
  for a node that has the files.

An actor or node lost mid-episode surfaces as a :class:`~..worker.protocol.WorkerFault`, exactly like a crashed local
worker: the runner's one error policy retries the episode on a fresh actor, which Ray places on any live node.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..worker.client import WorkerLink
from ..worker.protocol import WorkerError, WorkerFault, WorkerHung
from .concurrency import WORKER_MEMORY_BYTES, api_bound, cpus_per_worker, resolve_workers
from .executors import EpisodeJob, LocalExecutor, RoundListener, WorkerUnavailable, worker_slicer
from .ray_actor import RESULT_FAULT, RESULT_OK, RESULT_REFUSED, WorkerHost, pack_tree, tree_records

SLICER_RESOURCE = "slicer"  # custom resource advertised by nodes that have a 3D Slicer application
ACTOR_MARGIN_S = 30.0  # the actor enforces the call timeout itself; the driver waits this much longer
ABORT_WAIT_S = 10.0  # how long an abort waits for the slot threads to leave their Ray calls before disconnecting


# ------------------------------------------------------------------------------------------ driver side
@dataclass(frozen=True)
class ActorResources:
    """What each actor declares to Ray's scheduler for the viewer worker it hosts."""

    num_cpus: float = 1.0
    memory_bytes: int = WORKER_MEMORY_BYTES
    num_gpus: float = 0.0  # Track B: VISTA3D runs on the node's GPU when the actor holds one
    slicer: bool = False  # --slicer: only nodes advertising the ``slicer`` resource have the application

    def options(self) -> dict:
        options = {"num_cpus": self.num_cpus, "memory": self.memory_bytes, "num_gpus": self.num_gpus,
                   "max_restarts": 0, "max_task_retries": 0}
        if self.slicer:
            options["resources"] = {SLICER_RESOURCE: 1}
        return options

    def bundle(self) -> dict[str, float]:
        """The actor's demand as a placement-group bundle (Ray refuses zero amounts in a bundle)."""
        demands = {"CPU": self.num_cpus, "memory": self.memory_bytes, "GPU": self.num_gpus,
                   SLICER_RESOURCE: 1 if self.slicer else 0}
        return {name: need for name, need in demands.items() if need}

    def fits(self, cluster: dict) -> int:
        """How many such actors the cluster's total resources hold at once."""
        return min(int(cluster.get(name, 0) / need + 1e-9) for name, need in self.bundle().items())


def actor_resources(api_bound: bool, track: str, slicer: bool, cluster: dict,
                    num_gpus: float | None = None) -> ActorResources:
    """Declared resources: the concurrency rule's CPU share, the measured worker memory, and one GPU per
    Track B worker where the cluster has GPUs (unless ``num_gpus`` is given)."""
    if num_gpus is None:
        num_gpus = 1.0 if track == "B" and cluster.get("GPU", 0) > 0 else 0.0
    return ActorResources(num_cpus=cpus_per_worker(api_bound), num_gpus=num_gpus, slicer=slicer)


class RayCalls:
    """The gate every Ray call of an executor's threads passes: the driver may leave its Ray session only when no
    thread is inside the Ray API, since shutting Ray down under a thread still calling it can crash the whole
    process (ray-project/ray#31145). Once closed, a call is refused as a :class:`WorkerFault` instead."""

    def __init__(self):
        self._inside = 0
        self._closed = False
        self._changed = threading.Condition()

    @contextmanager
    def open(self, what: str) -> Iterator[None]:
        with self._changed:
            if self._closed:
                raise WorkerFault(f"the run was stopped before {what}")
            self._inside += 1
        try:
            yield
        finally:
            with self._changed:
                self._inside -= 1
                self._changed.notify_all()

    def close(self, wait_s: float) -> bool:
        """Refuse every new call; whether no call is in progress any more (waiting up to ``wait_s`` for that)."""
        with self._changed:
            self._closed = True
            return self._changed.wait_for(lambda: self._inside == 0, timeout=wait_s)


class RayWorker(WorkerLink):
    """The driver's handle on one actor; it answers like :class:`~.worker.WorkerProcess`, so the runner's
    episode code and error policy are the same for both executors."""

    def __init__(self, actor, out: Path, call_timeout_s: float, startup_timeout_s: float, cases: CaseShipper,
                 calls: RayCalls, log_path: Path | None = None, reservation=None):
        self.actor = actor
        self.calls = calls
        self.reservation = reservation  # the placement group holding the actor's resources, freed with it
        self.log_path = log_path
        self.out = Path(out)
        self.call_timeout_s = call_timeout_s
        self.startup_timeout_s = startup_timeout_s
        self.cases = cases
        self.info: dict = {}
        self.episode_dir: str | None = None  # relative to --out: what the node writes for the current episode

    @property
    def pid(self) -> int | None:
        return self.info.get("pid")

    @property
    def node(self) -> str:
        """The node's host name and Ray node id."""
        return f"{self.info.get('node')}/{self.info.get('node_id')}"

    def _call(self, method: str, *args, timeout_s: float, what: str):
        """Call the actor's ``method`` and wait for its answer; an actor that is lost or silent is discarded."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        try:
            with self.calls.open(what):
                actor = self.actor  # another thread may discard it meanwhile (an abort)
                if actor is None:
                    raise WorkerFault("the actor is gone")
                return ray.get(getattr(actor, method).remote(*args), timeout=timeout_s)
        except GetTimeoutError:
            self.kill(collect=False)
            raise WorkerHung(f"actor did not answer {what} within {timeout_s:g} s") from None
        except RayActorError as error:  # the actor process or its node is gone
            self.kill(collect=False)
            raise WorkerFault(f"lost the actor during {what}: {type(error).__name__}: "
                              f"{str(error).splitlines()[0] if str(error) else ''}") from error

    def _unwrap(self, answer: dict):
        if answer["status"] == RESULT_FAULT:
            raise (WorkerHung if answer.get("hung") else WorkerFault)(answer["message"])
        if answer["status"] == RESULT_REFUSED:
            raise WorkerError(answer["code"], answer["message"])
        return answer.get("result")

    def start(self) -> RayWorker:
        answer = self._call("start", timeout_s=self.startup_timeout_s + ACTOR_MARGIN_S, what="start-up")
        if answer["status"] != RESULT_OK:
            self.kill(collect=False)
        self._unwrap(answer)
        self.info = answer
        return self

    def request(self, op: str, timeout_s: float | None = None, **fields) -> dict:
        if op == "start":
            fields = self._localize(fields)
        wait = (timeout_s or self.call_timeout_s) + ACTOR_MARGIN_S
        result = self._unwrap(self._call("request", op, fields, timeout_s, timeout_s=wait, what=repr(op)))
        if op == "end":
            self.collect()
        return result

    def _localize(self, fields: dict) -> dict:
        """Ship missing case files; make the trace path relative to ``--out`` (the node writes it in scratch)."""
        for root in fields.get("data_roots") or []:
            self.cases.ensure(self, root)
        trace = Path(fields["trace_path"]).resolve()
        relative = trace.relative_to(self.out.resolve())
        self.episode_dir = relative.parent.as_posix()
        return {**fields, "trace_path": relative.as_posix()}

    def collect(self, timeout_s: float | None = None) -> None:
        """Bring the current episode's trace files home to ``--out``."""
        if self.episode_dir is None:
            return
        files = self._call("collect", self.episode_dir, timeout_s=timeout_s or self.call_timeout_s, what="collect")
        for relative, content in files.items():
            target = self.out / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        self.episode_dir = None

    def kill(self, collect: bool = True) -> None:
        """Discard the actor (and with it its worker); keep what the failed attempt traced if it still answers."""
        import ray

        actor, self.actor = self.actor, None
        if actor is None:
            return
        if collect and self.episode_dir is not None:
            self.actor = actor
            try:
                self.collect(timeout_s=10.0)
            except WorkerFault:
                pass
            self.actor = None
        try:
            with self.calls.open("discarding an actor"):
                ray.kill(actor, no_restart=True)
                release(self.reservation)
        except WorkerFault:  # the run was stopped: the actor and its reservation end with the driver's session
            pass
        self.reservation = None

    def close(self) -> None:
        """Shut the worker down and keep its log where the local pool keeps it (``workers/<slot>/worker.log``)."""
        import ray

        if self.actor is None:
            return
        try:
            with self.calls.open("closing the worker"):
                if self.log_path is not None:
                    log = ray.get(self.actor.worker_log.remote(), timeout=30)
                    self.log_path.parent.mkdir(parents=True, exist_ok=True)
                    with open(self.log_path, "ab") as handle:
                        handle.write(log)
                ray.get(self.actor.close.remote(), timeout=30)
        except Exception:  # noqa: BLE001 - an actor already gone (or a stopped run) has nothing left to close
            pass
        self.kill(collect=False)


def release(reservation) -> None:
    """Give a placement group's resources back to the cluster (nothing to do for none)."""
    if reservation is not None:
        from ray.util.placement_group import remove_placement_group

        remove_placement_group(reservation)


def check_reachable(address: str, timeout_s: float = 10.0) -> None:
    """Fail fast on a cluster address nothing answers at: ``ray.init`` would keep retrying it for minutes."""
    if address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot reach the Ray cluster at {address!r}: {error}") from None


class CaseShipper:
    """Driver side of case transfer: the file records of each data root once per run; the files go into the
    object store only for a node that lacks them, and are dropped once written there."""

    def __init__(self, cases_dir: Path):
        self.data = (Path(cases_dir) / "data").resolve()
        self.records: dict[str, dict[str, dict]] = {}
        self._lock = threading.Lock()

    def expected(self, root: str) -> dict[str, dict]:
        """The records of a case root, which must be one folder directly in the package's ``data/`` (no link
        on the way): a node writes it at this absolute path, so nothing else may ever be shipped."""
        path = Path(root)
        if path.parent.resolve() != self.data or path.is_symlink() or path.resolve().parent != self.data:
            raise WorkerFault(f"case root {root} is not a folder of the package's data directory {self.data}")
        with self._lock:
            if root not in self.records:
                try:
                    self.records[root] = tree_records(Path(root))
                except (OSError, ValueError) as error:
                    raise WorkerFault(f"case root {root} cannot be shipped: {error}") from error
            return self.records[root]

    def ensure(self, worker: RayWorker, root: str) -> None:
        import ray

        records = self.expected(root)
        status = worker._call("case_status", root, records, timeout_s=worker.call_timeout_s, what="case check")
        if status == "present":
            return
        if status == "different":
            raise WorkerFault(f"node {worker.info.get('node')} holds different files at {root}")
        with worker.calls.open("case transfer"):
            files = ray.put(pack_tree(Path(root)))
            try:
                worker._unwrap(worker._call("put_case", root, records, files, timeout_s=worker.call_timeout_s,
                                            what="case transfer"))
            finally:
                del files


class RayExecutor(LocalExecutor):
    """The local pool's episode loop (same job, same error policy, one driver thread per slot), with each
    slot's worker hosted by a Ray actor somewhere in the cluster.

    ``address``: the cluster to join; without one a small single-machine cluster is started for the run. A driver
    session this executor opened is closed with it; one already open in the process is left open.
    ``--workers auto`` takes as many actors as the cluster's resources hold at once."""

    def __init__(self, job: EpisodeJob, on_round: RoundListener | None = None, address: str | None = None,
                 num_gpus: float | None = None, placement_timeout_s: float = 60.0,
                 local_object_store_bytes: int = 256 << 20, abort_wait_s: float = ABORT_WAIT_S):
        import ray

        config = job.config
        self.calls = RayCalls()
        self.abort_wait_s = abort_wait_s
        self._connected_here = False
        if not ray.is_initialized():
            if address:
                ray.init(address=address, logging_level="WARNING", log_to_driver=False)
            else:  # a one-machine cluster: its object store only needs to hold case transfers
                ray.init(object_store_memory=local_object_store_bytes, include_dashboard=False,
                         logging_level="WARNING", log_to_driver=False)
            self._connected_here = True
        cluster = ray.cluster_resources()
        self.resources = actor_resources(api_bound(config), config.track, bool(worker_slicer(config)), cluster,
                                         num_gpus=num_gpus)
        self.placement_timeout_s = placement_timeout_s
        self.cases = CaseShipper(config.cases_dir)
        capacity = self.resources.fits(cluster)
        if capacity == 0:
            self._disconnect()
            raise ValueError(f"no node of the Ray cluster can host a worker needing {self.resources} "
                             f"(cluster: {cluster})")
        self._actor_class = ray.remote(WorkerHost)
        super().__init__(job, resolve_workers(config, capacity), on_round, launch=self._launch)

    def _launch(self, directory: Path) -> RayWorker:
        """A new actor for the slot at ``directory``, in two waits that mean different things. First the cluster
        reserves the actor's resources (a placement group): while none can, the slot gives way
        (:class:`WorkerUnavailable`) if other slots are still running; the last one keeps waiting. Then the actor's
        process starts on the reserved node, which on a busy node is slow, never a reason to give way: it has
        the start-up timeout of any worker."""
        import ray
        from ray.exceptions import GetTimeoutError
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        config = self.job.config
        with self.calls.open("reserving a worker's resources"):
            reservation = placement_group([self.resources.bundle()])
        while True:
            with self.calls.open("reserving a worker's resources"):  # each wait: an abort stops the loop
                try:
                    ray.get(reservation.ready(), timeout=self.placement_timeout_s)
                    break
                except GetTimeoutError:
                    others_run = any(slot.worker is not None and slot.directory != directory for slot in self.slots)
                    if others_run or self.resources.fits(ray.cluster_resources()) == 0:
                        release(reservation)
                        raise WorkerUnavailable(f"no node could host a worker within {self.placement_timeout_s:g} "
                                                f"s ({self.resources})") from None
        with self.calls.open("starting an actor"):
            strategy = PlacementGroupSchedulingStrategy(reservation)
            actor = self._actor_class.options(**self.resources.options(), scheduling_strategy=strategy).remote(
                worker_slicer(config), config.startup_timeout_s, config.call_timeout_s)
        worker = RayWorker(actor, config.out, config.call_timeout_s, config.startup_timeout_s, self.cases,
                           self.calls, log_path=Path(directory) / "worker.log", reservation=reservation)
        worker._call("__ray_ready__", timeout_s=config.startup_timeout_s + ACTOR_MARGIN_S, what="its process start")
        return worker.start()

    def _disconnect(self, wait_s: float = 0.0) -> None:
        """Close the gate to Ray calls and leave the session this executor opened -- only once none of its threads
        is inside a Ray call (waiting up to ``wait_s``). Otherwise the session stays open: Ray's exit handler
        ends it with the process rather than pull it from under a running call (ray-project/ray#31145)."""
        import ray

        settled = self.calls.close(wait_s if self._connected_here else 0.0)
        if self._connected_here and settled:
            ray.shutdown()
            self._connected_here = False

    def close(self) -> None:
        super().close()  # every slot thread has ended
        self._disconnect()

    def abort(self) -> None:
        """Stop now: no new episode, the actors killed (which ends their calls), then the driver leaves Ray once
        the slot threads are out of their Ray calls. Threads parked on a result the runner will never take are
        outside Ray and are not waited for."""
        super().abort()
        self._disconnect(self.abort_wait_s)

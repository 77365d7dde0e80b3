"""Where episodes execute. The runner owns the policy (what to run, outcomes, when to stop, what is written);
an :class:`Executor` only runs :class:`EpisodeJob` s and hands their records back.

:class:`LocalExecutor` runs them on a pool of local viewer worker processes, one thread per worker. Another
executor (e.g. over a Ray cluster) implements the same five methods and ships the same picklable job, so every
executor shares exactly one error policy.
"""

from __future__ import annotations

import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from ..core.audit import fresh_path, read_anchor
from ..core.names import confined
from ..worker.client import WorkerEnvironment, WorkerProcess
from ..worker.protocol import WorkerError, WorkerFault
from .agents.base import Agent, AgentContext
from .cases import Case, load_ground_truth
from .episode import EpisodeConfig, EpisodeOutcome, EpisodePrompt, run_episode
from .integrity import CaseIntegrityError
from .modules import PATHOLOGY, RADIOLOGY, ModuleSpec
from .outcomes import timeout_fault
from .preload import Attachments, PathologyRounds, PreloadError, montage_prompt, preload
from .tasks import EpisodeTask, RunConfig, offered_tools

MAX_WORKER_ATTEMPTS = 2  # a worker fault is retried once on a fresh worker; a second makes the episode INVALID

RoundListener = Callable[[EpisodeTask, EpisodeOutcome, str], None]


class WorkerUnavailable(Exception):
    """No worker can be placed for a slot now (e.g. a Ray cluster lost a node): the slot retires and its
    episode goes back to the queue for the others, without spending one of the episode's attempts."""


def worker_slicer(config: RunConfig) -> str | None:
    """The 3D Slicer a run's workers use: ``--slicer`` hosts radiology episodes only. Slicer's Python has no slide
    reader (openslide/tiffslide), so pathology episodes run on the headless worker, whose Python reads slides."""
    return config.slicer if config.spec.application == RADIOLOGY else None


def local_worker(config: RunConfig, directory: Path) -> WorkerProcess:
    """A viewer worker process on this machine (headless slicer-core, or ``--slicer`` for radiology)."""
    return WorkerProcess(directory, worker_slicer(config), config.startup_timeout_s, config.call_timeout_s).start()


@dataclass
class WorkerSlot:
    """One worker position of a pool: it starts a worker lazily and replaces it after a fault."""

    directory: Path
    launch: Callable[[Path], WorkerProcess]  # the executor's: a local process, or a Ray actor's handle
    worker: WorkerProcess | None = None
    started: list[int] = field(default_factory=list)  # pids of every worker this slot launched
    retired: bool = False  # the run was aborted, or no worker can be placed for it: no new worker starts

    def ensure(self) -> WorkerProcess:
        if self.retired:
            raise WorkerFault("the run was stopped")
        if self.worker is not None and not self.worker.alive():
            self.discard()
        if self.worker is None:
            self.worker = self.launch(self.directory)
            self.started.append(self.worker.pid)
        return self.worker

    def discard(self) -> None:
        if self.worker is not None:
            self.worker.kill()
            self.worker = None

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


class EpisodeJob:
    """Runs one episode on a worker slot and returns its unscored record (the runner scores and writes it).

    Holds only the run configuration and two factories, so it can be pickled to a remote executor."""

    def __init__(self, config: RunConfig, make_agent: Callable[[EpisodeTask], Agent],
                 build_prompt: Callable[[ModuleSpec, Case, Attachments, int], EpisodePrompt]):
        self.config = config
        self.make_agent = make_agent
        self.build_prompt = build_prompt

    def __call__(self, slot: WorkerSlot, task: EpisodeTask, on_round: RoundListener | None = None) -> dict:
        faults = []
        for attempt in range(task.prior_attempts + 1, task.prior_attempts + MAX_WORKER_ATTEMPTS + 1):
            try:
                return self.attempt(slot.ensure(), task, attempt, on_round)
            except CaseIntegrityError as changed:  # the package, not the worker: retrying cannot help
                return record(task, attempt, response=None, invalid=f"case package changed: {changed}")
            except (WorkerFault, WorkerError, PreloadError) as fault:
                slot.discard()
                faults.append(f"attempt {attempt}: {type(fault).__name__}: {fault}")
        return record(task, task.prior_attempts + MAX_WORKER_ATTEMPTS, response=None,
                      invalid="environment fault: " + "; ".join(faults), faults=faults)

    def attempt(self, worker: WorkerProcess, task: EpisodeTask, attempt: int,
                on_round: RoundListener | None = None) -> dict:
        config = self.config
        case = task.case
        out = Path(config.out)
        # an earlier invocation that died mid-episode left this attempt's trace: it is kept, never overwritten
        trace_path = fresh_path(confined(out / "episodes", task.episode_id), f"trace-{attempt}", ".jsonl")
        env = WorkerEnvironment(worker)
        header = {"episode_id": task.episode_id, "case_id": case.case_id, "module": config.module,
                  "repeat": task.repeat, "attempt": attempt, "agent": config.agent, "track": config.track,
                  "provider": config.provider.public() if config.provider else None, "worker_pid": worker.pid,
                  "worker_node": worker.node}
        spec = config.spec
        application = spec.application
        # a fresh worker builds its viewer on its first start (a radiology one imports Slicer): start-up work, so
        # bounded by the start-up timeout too, never cut short by a call timeout meant for one tool call
        env.start(application, [str(case.data_root)], "B" if config.track == "B" else "A",
                  config.max_rounds, str(trace_path), header, config.save_images,
                  timeout_s=max(config.call_timeout_s, config.startup_timeout_s))
        attachments = preload(env, spec, case)
        pathology = application == PATHOLOGY
        track_c = config.track == "C"
        # Track C: one answer turn on slice montages, no tools; else what the run's toolset shows (the episode
        # refuses a tool it did not offer)
        tools = [] if track_c else offered_tools(env.tools(), application, config.toolset, config.operators)
        max_rounds = 0 if track_c else config.max_rounds
        agent = self.make_agent(task)
        truth = load_ground_truth(config.cases_dir, case.case_id) if agent.privileged else None
        agent.reset(AgentContext(module=config.module, spec=spec, case=case, tools=tools, max_rounds=max_rounds,
                                 one_call_per_round=pathology, ground_truth=truth, seed=config.seed + task.repeat))
        if track_c:
            prompt = montage_prompt(spec, case, env, attachments)
        else:
            prompt = self.build_prompt(spec, case, attachments, config.max_rounds)
        repeat_task = config.provider is None or config.provider.image_history is None  # the policy: task once
        rounds = PathologyRounds(spec, case, config.max_rounds, repeat_task) if pathology else None
        listener = (lambda outcome, action: on_round(task, outcome, action)) if on_round else None
        episode_config = EpisodeConfig(max_rounds=max_rounds, max_tool_calls=config.max_tool_calls,
                                       one_call_per_round=pathology, round_observation=rounds, on_round=listener,
                                       timeout_s=config.episode_timeout_s)
        outcome = run_episode(agent, env, prompt, episode_config)
        env.end()
        invalid = timeout_fault(outcome.to_json(), config.episode_timeout_s)
        return record(task, attempt, response=outcome.final_text, invalid=invalid, error=outcome.error,
                      trace=trace_path.relative_to(out).as_posix(), trace_anchor=read_anchor(trace_path),
                      outcome=outcome.to_json(), worker_pid=worker.pid,
                      worker_node=worker.node)


def record(task: EpisodeTask, attempts: int, response: str | None, invalid: str | None,
           error: dict | None = None, **extra) -> dict:
    return {"episode_id": task.episode_id, "case_id": task.case.case_id, "repeat": task.repeat,
            "attempts": attempts, "response": response, "invalid": invalid, "error": error, **extra}


class Executor(ABC):
    """Runs submitted episodes and hands back ``(task, record)`` pairs as they finish."""

    @abstractmethod
    def submit(self, tasks: Sequence[EpisodeTask]) -> None: ...

    @abstractmethod
    def next_result(self, timeout_s: float) -> tuple[EpisodeTask, dict] | None:
        """The next finished episode, or None after ``timeout_s``; re-raises a harness failure."""

    @abstractmethod
    def outstanding(self) -> int:
        """Submitted episodes whose record has not been handed back (and will be)."""

    @abstractmethod
    def stop_dispatching(self) -> None:
        """Start no new episode; running ones finish and are handed back."""

    @abstractmethod
    def abort(self) -> None:
        """Stop now: running episodes are abandoned (they have no record, so a resume runs them again)."""

    @abstractmethod
    def close(self) -> None:
        """Release the workers once every result was handed back."""


class LocalExecutor(Executor):
    """A pool of local viewer worker processes, one thread each; a worker stays warm across episodes.

    A thread takes its next episode only after the runner has processed its previous result (the runner
    signals that by asking for the next one), so a stop decided on that result starts nothing new."""

    def __init__(self, job: EpisodeJob, workers: int, on_round: RoundListener | None = None,
                 launch: Callable[[Path], WorkerProcess] | None = None):
        self.job = job
        self.workers = max(workers, 1)
        self.on_round = on_round
        self.launch = launch or partial(local_worker, job.config)
        self.slots: list[WorkerSlot] = []
        self._work: queue.Queue[EpisodeTask] = queue.Queue()
        self._results: queue.Queue[tuple[EpisodeTask, dict, threading.Event] | BaseException] = queue.Queue()
        self._outstanding = 0
        self._lock = threading.Lock()
        self._queue_changed = threading.Condition(self._lock)
        self._running = 0  # episodes a slot thread took and has no record of yet: one may come back to the queue
        self._threads: list[threading.Thread] = []
        self._last_handed: threading.Event | None = None

    def submit(self, tasks: Sequence[EpisodeTask]) -> None:
        for task in tasks:
            self._work.put(task)
        with self._lock:
            self._outstanding += len(tasks)
        out = Path(self.job.config.out)
        while len(self.slots) < min(self.workers, max(self._outstanding, 1)):
            slot = WorkerSlot(out / "workers" / f"w{len(self.slots)}", self.launch)
            self.slots.append(slot)
            thread = threading.Thread(target=self._drain, args=(slot,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _take(self) -> EpisodeTask | None:
        """The next queued episode, or None once none is queued and none can come back. While another thread runs
        an episode, an idle one waits: that slot may give way and put its episode back (:meth:`_retire`), and a
        thread must be left to take it (else the run waits forever for an episode nobody runs)."""
        with self._queue_changed:
            while True:
                try:
                    task = self._work.get_nowait()
                except queue.Empty:
                    if not self._running:
                        return None
                    self._queue_changed.wait()
                    continue
                self._running += 1
                return task

    def _drain(self, slot: WorkerSlot) -> None:
        try:
            while True:
                task = self._take()
                if task is None:
                    return
                try:
                    record = self.job(slot, task, self.on_round)
                except WorkerUnavailable:
                    self._retire(slot, task)
                    return
                finally:  # after a give-way's episode is back in the queue
                    with self._queue_changed:
                        self._running -= 1
                        self._queue_changed.notify_all()
                processed = threading.Event()
                self._results.put((task, record, processed))
                processed.wait()
        except BaseException as error:  # a harness bug: hand it to the runner, which re-raises it
            self._results.put(error)
        finally:
            slot.close()

    def _retire(self, slot: WorkerSlot, task: EpisodeTask) -> None:
        """Give ``task`` back to the queue; when no slot is left to take it, nothing more can run now: the
        pending episodes are dropped from this invocation (a resume runs them)."""
        slot.retired = True
        self._work.put(task)
        if all(other.retired for other in self.slots):
            self.stop_dispatching()

    def _release_last(self) -> None:
        if self._last_handed is not None:
            self._last_handed.set()
            self._last_handed = None

    def next_result(self, timeout_s: float) -> tuple[EpisodeTask, dict] | None:
        self._release_last()  # the runner is done with the previous result
        try:
            item = self._results.get(timeout=timeout_s)
        except queue.Empty:
            return None
        with self._lock:
            self._outstanding -= 1
        if isinstance(item, BaseException):
            raise item
        task, record, self._last_handed = item
        return task, record

    def outstanding(self) -> int:
        with self._lock:
            return self._outstanding

    def stop_dispatching(self) -> None:
        dropped = 0
        while True:
            try:
                self._work.get_nowait()
            except queue.Empty:
                break
            dropped += 1
        with self._lock:
            self._outstanding -= dropped

    def abort(self) -> None:
        self.stop_dispatching()
        for slot in self.slots:
            slot.retired = True
            slot.discard()
        with self._lock:
            self._outstanding = 0
        self._release_last()

    def close(self) -> None:
        self._release_last()
        for thread in self._threads:
            thread.join()

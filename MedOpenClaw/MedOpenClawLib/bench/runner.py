"""The batch runner behind ``medopenclaw bench run``: episodes over worker processes, with retry, resume and
live progress, ending with the aggregate scores as the last line of stdout.

Layout of ``--out``::

    run.json                          the run's identity (module, agent, model, track, cases, ...)
    episodes/<case>__r<k>/result.json one finished episode, written atomically (its presence = done)
    episodes/<case>__r<k>/trace-<attempt>.jsonl  the audit trace of each attempt (+ _images/)
    workers/<slot>/worker.log         worker output
    summary.json                      the aggregate, rewritten at the end of every invocation

Resume: an episode is done exactly when its result.json exists, so re-running the same command skips it
and an interrupted episode (no result.json) is simply run again -- nothing is lost or duplicated. A worker
that crashes or hangs is replaced and the episode retried once; a second fault records it INVALID.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..audit import read_anchor
from ..pathology.actions import MODEL_VISIBLE_ACTIONS
from ..providers import ProviderConfig
from .agents.base import Agent, AgentContext
from .cases import PATHOLOGY_MODULES, Case, GroundTruth, load_cases, load_ground_truth
from .episode import EpisodeConfig, EpisodePrompt, run_episode
from .integrity import CaseIntegrityError
from .parsers import parse_response
from .preload import (
    Attachments,
    PathologyRounds,
    PreloadError,
    module_prompt,
    montage_prompt,
    preload,
    viewer_kind,
)
from .progress import Progress
from .scoring import aggregate, score_case
from .scoring.batch import answered
from .scoring.process import aggregate_process, process_metrics
from .worker import WorkerEnvironment, WorkerError, WorkerFault, WorkerProcess

TRACKS = ("A", "B", "C")  # C: runtime-agnostic (App. C.2): one turn on slice montages
MAX_ATTEMPTS = 2


def write_json_atomic(path: Path, value: dict) -> None:
    """Write-then-rename: a reader (or a resumed run) sees the whole file or none of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(value, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def check_track(track: str, module: str) -> None:
    if track not in TRACKS:
        raise ValueError(f"track must be one of {', '.join(TRACKS)}")
    if track == "C" and module in PATHOLOGY_MODULES:
        raise ValueError("Track C (2D slice montages) covers the radiology modules only")


@dataclass
class RunConfig:
    module: str
    agent: str
    out: Path
    cases_dir: Path
    track: str = "A"
    limit: int | None = None
    repeats: int = 1
    workers: int = 1
    slicer: str | None = None
    max_rounds: int = 20
    seed: int = 0
    provider: ProviderConfig | None = None
    replay_from: str | None = None  # --agent replay: the run whose recorded model outputs are replayed
    call_timeout_s: float = 300.0
    startup_timeout_s: float = 120.0
    save_images: bool = True

    def __post_init__(self):
        check_track(self.track, self.module)

    def identity(self) -> dict:
        return {
            "module": self.module,
            "agent": self.agent,
            "track": self.track,
            "cases_dir": str(Path(self.cases_dir).resolve()),
            "max_rounds": self.max_rounds,
            "seed": self.seed,
            "provider": self.provider.public() if self.provider else None,
            "replay_from": self.replay_from,
        }


@dataclass(frozen=True)
class EpisodeTask:
    case: Case
    repeat: int

    @property
    def episode_id(self) -> str:
        return f"{self.case.case_id}__r{self.repeat}"


@dataclass
class WorkerSlot:
    """One worker position of the pool: it starts a worker lazily and replaces it after a fault."""

    directory: Path
    config: RunConfig
    worker: WorkerProcess | None = None
    started: list[int] = field(default_factory=list)  # pids of every worker this slot launched

    def ensure(self) -> WorkerProcess:
        if self.worker is not None and not self.worker.alive():
            self.discard()
        if self.worker is None:
            self.worker = WorkerProcess(self.directory, self.config.slicer, self.config.startup_timeout_s,
                                        self.config.call_timeout_s).start()
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


class BenchmarkRunner:
    """Runs every pending episode of a configuration; ``make_agent(task)`` builds a fresh agent per episode."""

    def __init__(self, config: RunConfig, make_agent: Callable[[EpisodeTask], Agent],
                 build_prompt: Callable[[Case, Attachments, int], EpisodePrompt], progress_stream=None):
        self.config = config
        self.make_agent = make_agent
        self.build_prompt = build_prompt
        self.out = Path(config.out)
        self.progress_stream = progress_stream
        self.slots: list[WorkerSlot] = []
        self.executed: list[str] = []  # episode ids run by this invocation

    # ------------------------------------------------------------------ plan
    def tasks(self) -> list[EpisodeTask]:
        cases = load_cases(self.config.cases_dir)
        cases = [case for case in cases if case.module == self.config.module]
        if self.config.limit is not None:
            cases = cases[: self.config.limit]
        return [EpisodeTask(case, repeat) for case in cases for repeat in range(1, self.config.repeats + 1)]

    def result_path(self, task: EpisodeTask) -> Path:
        return self.out / "episodes" / task.episode_id / "result.json"

    def _check_identity(self) -> None:
        manifest = self.out / "run.json"
        identity = self.config.identity()
        if manifest.exists():
            previous = json.loads(manifest.read_text())
            if previous != identity:
                changed = sorted(key for key in identity if previous.get(key) != identity[key])
                raise ValueError(f"{self.out} holds a different run (differs in {', '.join(changed)}); "
                                 "use another --out")
        else:
            write_json_atomic(manifest, identity)

    # ------------------------------------------------------------------ run
    def run(self) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        self._check_identity()
        tasks = self.tasks()
        pending = [task for task in tasks if not self.result_path(task).exists()]
        progress = Progress(len(tasks), len(tasks) - len(pending), self.progress_stream)
        progress.start()
        work: queue.Queue[EpisodeTask] = queue.Queue()
        for task in pending:
            work.put(task)
        self.slots = [WorkerSlot(self.out / "workers" / f"w{index}", self.config)
                      for index in range(min(self.config.workers, max(len(pending), 1)))]
        errors: list[BaseException] = []

        def drain(slot: WorkerSlot) -> None:
            try:
                while True:
                    try:
                        task = work.get_nowait()
                    except queue.Empty:
                        return
                    record = self.run_task(slot, task)
                    write_json_atomic(self.result_path(task), record)
                    self.executed.append(task.episode_id)
                    progress.update(task.episode_id, record.get("score"), bool(record.get("invalid")))
            except BaseException as error:  # a harness bug: stop this thread, report after joining
                errors.append(error)
            finally:
                slot.close()

        threads = [threading.Thread(target=drain, args=(slot,), daemon=True) for slot in self.slots]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        progress.finish()
        if errors:
            raise errors[0]
        summary = self.summarize(tasks)
        write_json_atomic(self.out / "summary.json", summary)
        return summary

    def run_task(self, slot: WorkerSlot, task: EpisodeTask) -> dict:
        faults = []
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return self.attempt(slot.ensure(), task, attempt)
            except CaseIntegrityError as changed:  # the package, not the worker: retrying cannot help
                return self._record(task, attempt, response=None, invalid=f"case package changed: {changed}")
            except (WorkerFault, WorkerError, PreloadError) as fault:
                slot.discard()
                faults.append(f"attempt {attempt}: {type(fault).__name__}: {fault}")
        return self._record(task, MAX_ATTEMPTS, response=None, invalid="environment fault: " + "; ".join(faults),
                            faults=faults)

    def attempt(self, worker: WorkerProcess, task: EpisodeTask, attempt: int) -> dict:
        config = self.config
        case = task.case
        episode_dir = self.out / "episodes" / task.episode_id
        trace_path = episode_dir / f"trace-{attempt}.jsonl"
        env = WorkerEnvironment(worker)
        header = {"episode_id": task.episode_id, "case_id": case.case_id, "module": config.module,
                  "repeat": task.repeat, "attempt": attempt, "agent": config.agent, "track": config.track,
                  "provider": config.provider.public() if config.provider else None, "worker_pid": worker.pid}
        env.start(viewer_kind(config.module), [str(case.data_root)], "B" if config.track == "B" else "A",
                  config.max_rounds, str(trace_path), header, config.save_images)
        attachments = preload(env, case)
        pathology = config.module in PATHOLOGY_MODULES
        track_c = config.track == "C"
        tools = [] if track_c else env.tools()  # Track C: one answer turn on slice montages, no tools
        if pathology:  # Table 10: the tools the paper's pathology agents see
            tools = [tool for tool in tools if tool["name"] in MODEL_VISIBLE_ACTIONS]
        max_rounds = 0 if track_c else config.max_rounds
        agent = self.make_agent(task)
        truth = load_ground_truth(config.cases_dir, case.case_id) if agent.privileged else None
        agent.reset(AgentContext(module=config.module, case=case, tools=tools, max_rounds=max_rounds,
                                 one_call_per_round=pathology, ground_truth=truth, seed=config.seed + task.repeat))
        if track_c:
            prompt = montage_prompt(case, env, attachments)
        else:
            prompt = self.build_prompt(case, attachments, config.max_rounds)
        rounds = PathologyRounds(case, config.max_rounds) if pathology else None
        episode_config = EpisodeConfig(max_rounds=max_rounds, one_call_per_round=pathology, round_observation=rounds)
        outcome = run_episode(agent, env, prompt, episode_config)
        env.end()
        record = self._record(task, attempt, response=outcome.final_text,
                              invalid=outcome.invalid_reason if outcome.status == "invalid" else None,
                              trace=trace_path.relative_to(self.out).as_posix(), trace_anchor=read_anchor(trace_path),
                              outcome=outcome.to_json(),
                              worker_pid=worker.pid)
        return record

    def _record(self, task: EpisodeTask, attempts: int, response: str | None, invalid: str | None,
                **extra) -> dict:
        record = {"episode_id": task.episode_id, "case_id": task.case.case_id, "repeat": task.repeat,
                  "attempts": attempts, "response": response, "invalid": invalid, **extra}
        record["score"] = self.score(task.case.case_id, response, invalid).to_json()
        return record

    # ------------------------------------------------------------------ score
    def ground_truth(self, case_id: str) -> GroundTruth:
        return load_ground_truth(self.config.cases_dir, case_id)

    def score(self, case_id: str, response: str | None, invalid: str | None):
        parsed = parse_response(self.config.module, response)
        score = score_case(self.config.module, self.ground_truth(case_id), parsed, invalid=invalid)
        score.details["parsed"] = parsed
        return score

    def summarize(self, tasks: list[EpisodeTask]) -> dict:
        """Aggregate every finished episode of the run (this invocation's and earlier ones) the same way."""
        from ..audit import read_trace

        scores, process = [], []
        for task in tasks:
            path = self.result_path(task)
            if not path.exists():
                continue
            record = json.loads(path.read_text())
            score = self.score(record["case_id"], record.get("response"), record.get("invalid"))
            scores.append(score)
            if record.get("trace") and not record.get("invalid"):
                metrics = process_metrics(self.config.module, read_trace(self.out / record["trace"]),
                                          answered(self.config.module, score.details["parsed"]))
                process.append(metrics)
        summary = aggregate(scores) if scores else {"module": self.config.module, "n": 0, "task": None,
                                                     "strict": None, "loc": None, "invalid": 0}
        summary["module"] = self.config.module
        summary["episodes"] = len(scores)
        summary["missing"] = len(tasks) - len(scores)
        summary["executed_now"] = len(self.executed)
        if process:
            summary["process"] = aggregate_process(process)
        return summary


# ---------------------------------------------------------------------------------------------------- CLI
def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    return Path(cache_dir or os.environ.get("MEDOPENCLAW_CACHE") or Path.home() / ".cache" / "medopenclaw")


def cohort_fingerprint() -> str:
    """Hash of the generator and loader sources: a changed generator never reuses a stale cached cohort."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted([*(package / "synthetic").glob("*.py"), *(package / "loaders").glob("*.py"),
                        package / "cases.py"]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def synthetic_cases(module: str, seed: int = 0, cases: int = 6, cache_dir: str | os.PathLike | None = None) -> Path:
    """The embedded synthetic cohort of ``module`` as a case package, generated once and cached. The package is
    built in a staging directory and renamed into place, so an interrupted generation is simply redone and
    concurrent runs never see half a package."""
    from .loaders import prepare
    from .synthetic.cohort import DATASET_DIRS, CohortConfig, write_cohort

    root = cache_root(cache_dir) / f"synthetic-{cohort_fingerprint()}-seed{seed}-n{cases}"
    package = root / "cases" / module
    if (package / "manifest.json").exists():
        return package
    staging = root / f"staging-{module}-{os.getpid()}"
    try:
        write_cohort(staging / "raw", CohortConfig(seed=seed, cases=cases), modules=[module])
        prepare(module, staging / "raw" / DATASET_DIRS[module], staging / "cases")
        package.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(staging / "cases", package)
        except OSError:  # another run finished the same package first
            if not (package / "manifest.json").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # packages hard-link (or copy) files: the raw layout can go
    return package


MODEL_AGENTS = ("model", "montage")  # agents that call a model provider


def agent_factory(args) -> Callable[[EpisodeTask], Agent]:
    from .agents import OFFLINE_AGENTS
    from .agents.model import ModelAgent
    from .agents.replay import ReplayAgent, episode_trace, recorded_outputs

    if args.agent in OFFLINE_AGENTS:
        return lambda task: OFFLINE_AGENTS[args.agent]()
    if args.agent in MODEL_AGENTS:
        from ..providers import make_provider

        config = provider_config(args)
        return lambda task: ModelAgent(make_provider(config), name=args.agent)
    if args.agent == "replay":
        def replay(task: EpisodeTask) -> Agent:
            trace = episode_trace(args.replay_from, task.episode_id)
            return ReplayAgent(recorded_outputs(trace), source=str(trace))

        return replay
    raise ValueError(f"unknown agent {args.agent!r}")


def provider_config(args) -> ProviderConfig | None:
    if args.agent not in MODEL_AGENTS:
        return None
    return ProviderConfig.resolve(model=args.model, provider=args.provider, base_url=args.base_url,
                                  temperature=args.temperature, seed=args.seed, timeout_s=args.model_timeout)


def check_agent_track(args) -> None:
    """Track C is the one-turn montage baseline: only the montage agent (or a replay of one) runs there."""
    check_track(args.track, args.module)
    if args.agent == "montage" and args.track != "C":
        raise ValueError("--agent montage is the Track C baseline: add --track C")
    if args.track == "C" and args.agent not in ("montage", "replay"):
        raise ValueError("Track C runs --agent montage (or --agent replay of a montage run)")
    if (args.agent == "replay") != bool(args.replay_from):
        raise ValueError("--agent replay needs --replay-from RUN_DIR, and --replay-from needs --agent replay")


def _run(args) -> int:
    import sys

    try:
        check_agent_track(args)
        cases_dir = Path(args.cases) if args.cases else synthetic_cases(args.module, args.cohort_seed,
                                                                        cache_dir=args.cache_dir)
        config = RunConfig(module=args.module, agent=args.agent, out=Path(args.out), cases_dir=cases_dir,
                           track=args.track, limit=args.limit, repeats=args.repeats, workers=args.workers,
                           slicer=args.slicer, max_rounds=args.max_rounds, seed=args.seed,
                           provider=provider_config(args), call_timeout_s=args.call_timeout,
                           replay_from=str(Path(args.replay_from).resolve()) if args.replay_from else None)
        summary = BenchmarkRunner(config, agent_factory(args), module_prompt).run()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(summary, sort_keys=True))  # the last stdout line: the aggregate, keys as `bench score`
    return 0


def add_bench_subcommand(bench_subparsers) -> None:
    from .agents import OFFLINE_AGENTS
    from .cases import MODULES

    parser = bench_subparsers.add_parser("run", help="run agents on MedFlow-Bench episodes (resumable)")
    parser.add_argument("--module", required=True, choices=MODULES)
    parser.add_argument("--agent", required=True, choices=[*OFFLINE_AGENTS, *MODEL_AGENTS, "replay"],
                        help="oracle, heuristic, random (offline); model; montage (Track C); replay")
    parser.add_argument("--replay-from", help="--agent replay: an earlier run directory whose model outputs to replay")
    parser.add_argument("--model", help="model name for --agent model/montage (or MEDOPENCLAW_MODEL)")
    parser.add_argument("--provider", choices=("openai", "anthropic"), help="wire protocol (or MEDOPENCLAW_PROVIDER)")
    parser.add_argument("--base-url", help="API base URL (or MEDOPENCLAW_BASE_URL); the key: MEDOPENCLAW_API_KEY")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--model-timeout", type=float, default=120.0, help="seconds per model call")
    parser.add_argument("--track", choices=TRACKS, default="A",
                        help="A viewer-native, B advanced operators, C 2D slice montage in one turn")
    parser.add_argument("--cases", help="case packages from `bench prepare`; default: the synthetic cohort")
    parser.add_argument("--cohort-seed", type=int, default=0, help="seed of the embedded synthetic cohort")
    parser.add_argument("--cache-dir", help="where the synthetic cohort is cached (default: MEDOPENCLAW_CACHE "
                                            "or ~/.cache/medopenclaw)")
    parser.add_argument("--limit", type=int, help="first N cases only")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1, help="viewer worker processes")
    parser.add_argument("--slicer", help="path of a 3D Slicer executable to use as the worker")
    parser.add_argument("--max-rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--call-timeout", type=float, default=300.0, help="seconds before a worker call is a hang")
    parser.add_argument("--out", required=True)
    parser.set_defaults(func=_run)

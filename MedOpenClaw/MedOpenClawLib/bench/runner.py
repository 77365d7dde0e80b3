"""The batch runner behind ``medopenclaw bench run``: plans the pending episodes, hands them to an executor,
applies the error policy to what comes back, shows live progress, and ends with the aggregate scores as the
last line of stdout.

Layout of ``--out``::

    run.json                          the run's identity (module, agent, model, track, cases, ...) and the
                                      provenance of every invocation (version, commit, time, command line)
    episodes/<case>__r<k>/result.json one finished episode (scored or INVALID), written atomically
    episodes/<case>__r<k>/error.json  the latest attempt ended in a provider error: re-run next time
    episodes/<case>__r<k>/trace-<attempt>.jsonl  the audit trace of each attempt (+ _images/)
    workers/<slot>/worker.log         worker output
    summary.json                      the aggregate, rewritten at the end of every invocation

Resume: running the same command again runs every episode without a result.json -- never run, interrupted,
or errored -- and nothing finished is lost or duplicated. A worker that crashes or hangs is replaced and the
episode retried once; a second fault records it INVALID. Ctrl-C once: start nothing new, let running episodes
finish, write summary.json; twice: stop at once (running episodes are simply re-run on resume).
"""

from __future__ import annotations

import dataclasses
import json
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from ..core.audit import read_trace
from ..core.provenance import finish
from ..core.provenance import provenance as invocation_provenance
from ..trace_audit import audit_records, summarize_audits
from .agents.base import Agent
from .cases import Case, GroundTruth, load_cases, load_ground_truth, read_manifest
from .concurrency import resolve_workers
from .episode import EpisodePrompt
from .executors import EpisodeJob, Executor, LocalExecutor, RoundListener
from .outcomes import (
    ERROR,
    REJECTED,
    EpisodeStore,
    ErrorPolicy,
    Tally,
    exit_status,
    outcome_of,
    write_json_atomic,
)
from .preload import Attachments
from .progress import Progress
from .scoring import aggregate, score_case
from .scoring.process import aggregate_process, process_metrics
from .spec import ModuleSpec
from .tasks import EpisodeTask, RunConfig, select_cases

__all__ = ["BenchmarkRunner", "EpisodeTask", "RunConfig", "exit_status"]

ExecutorFactory = Callable[[EpisodeJob, RunConfig, RoundListener], Executor]


def local_executor(job: EpisodeJob, config: RunConfig, on_round: RoundListener) -> Executor:
    return LocalExecutor(job, resolve_workers(config), on_round)


class StopNow(BaseException):
    """The second Ctrl-C: leave the result loop at once (not an Exception, so nothing swallows it)."""


class BenchmarkRunner:
    """Runs every pending episode of a configuration; ``make_agent(task)`` builds a fresh agent per episode,
    ``make_executor`` decides where episodes execute (local worker processes by default)."""

    def __init__(self, config: RunConfig, make_agent: Callable[[EpisodeTask], Agent],
                 build_prompt: Callable[[ModuleSpec, Case, Attachments, int], EpisodePrompt], progress_stream=None,
                 make_executor: ExecutorFactory = local_executor, resume_hint: str = "the same command",
                 provenance: dict | None = None):
        self.config = config
        self.job = EpisodeJob(config, make_agent, build_prompt)
        self.spec = config.spec  # looked up once, where the run starts, and handed down from here
        self.make_executor = make_executor
        self.out = Path(config.out)
        self.store = EpisodeStore(self.out)
        self.progress_stream = progress_stream
        self.resume_hint = resume_hint
        self.provenance = provenance or invocation_provenance()
        self.invocations: list[dict] = []  # run.json's provenance of every invocation, this one last
        self.executor: Executor | None = None
        self.executed: list[str] = []  # episode ids run by this invocation
        self.interrupts = 0

    @property
    def slots(self) -> list:
        """The local executor's worker slots (empty for other executors)."""
        return getattr(self.executor, "slots", [])

    # ------------------------------------------------------------------ plan
    def tasks(self) -> list[EpisodeTask]:
        package = read_manifest(self.config.cases_dir).get("module")
        if package and package != self.config.module:
            raise ValueError(f"{self.config.cases_dir} is a {package} case package (its manifest says so), not "
                             f"{self.config.module}: run it with --module {package}")
        cases = [case for case in load_cases(self.config.cases_dir) if case.module == self.config.module]
        cases = select_cases(cases, self.config.limit, self.config.case_ids)
        return [EpisodeTask(case, repeat) for case in cases for repeat in range(1, self.config.repeats + 1)]

    def result_path(self, task: EpisodeTask) -> Path:
        return self.store.result_path(task.episode_id)

    def _check_identity(self) -> None:
        """A resumed run must be the same run; every invocation's provenance is appended to run.json."""
        manifest = self.out / "run.json"
        identity = self.config.identity()
        previous = json.loads(manifest.read_text()) if manifest.exists() else None
        if previous is not None:
            recorded = {key: value for key, value in previous.items() if key != "invocations"}
            if recorded != identity:
                changed = sorted(key for key in {*identity, *recorded} if recorded.get(key) != identity.get(key))
                raise ValueError(f"{self.out} holds a different run (differs in {', '.join(changed)}); "
                                 "use another --out")
        self.invocations = [*(previous or {}).get("invocations", []), self.provenance]
        self._write_manifest(identity)

    def _write_manifest(self, identity: dict) -> None:
        write_json_atomic(self.out / "run.json", {**identity, "invocations": self.invocations})

    def plan(self, tasks: list[EpisodeTask]) -> tuple[Tally, list[EpisodeTask]]:
        """What earlier invocations left (the tally) and what to run now: every episode not finished."""
        tally = Tally(len(tasks))
        pending = []
        for task in tasks:
            existing = self.store.load(task.episode_id)
            if existing is not None:
                tally.record(task.episode_id, existing)
            rerun = outcome_of(existing) == ERROR or (self.config.rerun_rejected and outcome_of(existing) == REJECTED) \
                if existing is not None else True
            if rerun:
                prior = existing["attempts"] if existing else 0
                pending.append(dataclasses.replace(task, prior_attempts=prior))
        return tally, pending

    # ------------------------------------------------------------------ run
    def run(self) -> dict:
        tasks = self.tasks()  # a bad case package is refused before anything is written
        self.out.mkdir(parents=True, exist_ok=True)
        self._check_identity()
        tally, pending = self.plan(tasks)
        progress = Progress(tally, self.progress_stream, self.config.max_rounds)
        policy = ErrorPolicy(self.config.fail_on_error)
        aborted = False
        # trapped before anything is drawn or started: a Ctrl-C while workers start ends as any other interrupt
        previous_handler = self._trap_interrupts()
        try:
            progress.start()
            self.executor = self.make_executor(self.job, self.config, progress.episode)
            unsubmitted = len(pending)
            if not self.interrupts:  # interrupted while the workers started: nothing is started
                self.executor.submit(pending)
                unsubmitted = 0
            acted_on_interrupt = False
            while True:
                if self.interrupts and not acted_on_interrupt:
                    acted_on_interrupt = True
                    self._finish_running_only(progress, unsubmitted)
                if not self.executor.outstanding():
                    break
                item = self.executor.next_result(0.25)
                if item is None:
                    continue
                task, record = item
                record = self.store.write(self._scored(task, record))
                tally.record(task.episode_id, record)
                self.executed.append(task.episode_id)
                progress.update(task.episode_id)
                reason = policy.observe(record, tally)
                if reason:
                    progress.note(f"stopping: {reason}")
                    self.executor.stop_dispatching()
        except StopNow:
            aborted = True
            progress.note("interrupted again: stopping now")
            if self.executor is not None:
                self.executor.abort()
        except BaseException:  # a harness failure: what finished is still summarised, then the failure surfaces
            if self.executor is not None:
                self.executor.abort()
            write_json_atomic(self.out / "summary.json", self.summarize(tasks, tally, policy.stop_reason))
            raise
        finally:
            if previous_handler is not None:
                signal.signal(signal.SIGINT, previous_handler)
            progress.finish()
            self.invocations[-1] = finish(self.invocations[-1])
            self._write_manifest(self.config.identity())
        if not aborted and self.executor is not None:
            self.executor.close()
        summary = self.summarize(tasks, tally, policy.stop_reason)
        write_json_atomic(self.out / "summary.json", summary)
        if summary["interrupted"] or summary["errors"] or summary["missing"]:
            progress.note(f"{summary['errors']} episodes in error, {summary['missing']} not run: "
                          f"to resume, run {self.resume_hint} again")
        if summary["rejected_now"]:
            progress.note(f"{summary['rejected_now']} episodes rejected by the model server (see error.json: a "
                          "resume does not re-run them; --rerun-rejected does)")
        return summary

    def _trap_interrupts(self):
        """Ctrl-C once: finish running episodes and start nothing new; twice: stop at once. The handler only
        counts (and raises the second time): it runs between any two bytecodes of the main thread, maybe while
        that thread holds the progress line's or the executor's lock, so taking either there would wait forever;
        the run loop acts on the count. Only the main thread may install a handler (None is returned elsewhere and
        Ctrl-C keeps its default)."""
        if threading.current_thread() is not threading.main_thread():
            return None

        def interrupt(signum, frame):
            self.interrupts += 1
            if self.interrupts > 1:
                raise StopNow

        return signal.signal(signal.SIGINT, interrupt)

    def _finish_running_only(self, progress: Progress, unsubmitted: int) -> None:
        """The first Ctrl-C, acted on by the run loop: what is left outstanding after this is what is running."""
        waiting = self.executor.outstanding() + unsubmitted
        self.executor.stop_dispatching()
        running = self.executor.outstanding()
        progress.note(f"interrupted: finishing {running} running episode{'s' if running != 1 else ''} "
                      f"({waiting - running} not started are left for a resume); Ctrl-C again to stop now")

    def _scored(self, task: EpisodeTask, record: dict) -> dict:
        """A finished episode's score; a rejected one (final, model-side) is scored as unanswered: 0, within n."""
        if outcome_of(record) == ERROR:
            return {**record, "score": None}
        score = self.score(task.case.case_id, record.get("response"), record.get("invalid"))
        return {**record, "score": score.to_json(), "audit": self.audit(record, score.details["parsed"])}

    def audit(self, record: dict, parsed: dict) -> dict | None:
        """The trace audit of a finished episode (evidence provenance and findings); None without a trace."""
        if not record.get("trace"):
            return None
        try:
            records = read_trace(self.out / record["trace"])
        except (OSError, UnicodeDecodeError, ValueError) as error:
            return {"error": f"trace unreadable: {error}", "findings": []}
        return audit_records(records, self.spec, parsed).to_json()

    # ------------------------------------------------------------------ score
    def ground_truth(self, case_id: str) -> GroundTruth:
        return load_ground_truth(self.config.cases_dir, case_id)

    def score(self, case_id: str, response: str | None, invalid: str | None):
        parsed = self.spec.read_answer(response)
        score = score_case(self.spec, self.ground_truth(case_id), parsed, invalid=invalid)
        score.details["parsed"] = parsed
        return score

    def summarize(self, tasks: list[EpisodeTask], tally: Tally | None = None, stopped: str | None = None) -> dict:
        """Aggregate every finished episode of the run (this invocation's and earlier ones) the same way; the
        outcome counts come from the same tally the progress line shows."""
        if tally is None:
            tally = self.plan(tasks)[0]
        scores, process = [], []
        for task in tasks:
            record = tally.records.get(task.episode_id)
            if record is None or outcome_of(record) == ERROR:  # rejected ones count, scored as unanswered
                continue
            score = self.score(record["case_id"], record.get("response"), record.get("invalid"))
            scores.append(score)
            if record.get("trace") and not record.get("invalid"):
                metrics = process_metrics(self.spec, read_trace(self.out / record["trace"]),
                                          self.spec.answered(score.details["parsed"]))
                process.append(metrics)
        summary = aggregate(scores, self.spec) if scores else {"module": self.config.module, "n": 0, "task": None,
                                                     "strict": None, "loc": None, "invalid": 0}
        summary["module"] = self.config.module
        summary["episodes"] = len(scores)
        summary["episode_ids"] = [task.episode_id for task in tasks]  # the report counts only these
        summary.update(tally.to_json())
        summary["audit"] = summarize_audits([(tally.records.get(task.episode_id) or {}).get("audit")
                                             for task in tasks])
        summary["executed_now"] = len(self.executed)
        summary["rejected_now"] = sum(1 for episode_id in set(self.executed)
                                      if outcome_of(tally.records.get(episode_id) or {}) == REJECTED)
        summary["stopped"] = stopped
        summary["interrupted"] = self.interrupts > 0
        if process:
            summary["process"] = aggregate_process(process)
        return summary

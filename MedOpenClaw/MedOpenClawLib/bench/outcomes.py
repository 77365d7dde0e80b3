"""Episode outcomes and the run's error policy -- one piece shared by every executor.

Three outcomes, kept apart (as inspect_ai keeps sample errors apart from scores):

- *scored*: the episode finished and its answer was scored;
- *INVALID*: an environment fault (a worker that crashed or hung twice, a case that cannot be loaded); the
  MedFlow-Bench excludes these from every denominator, and they are final;
- *error*: the model provider failed transiently (outage, rate limit past the retry deadline, lost connection)
  or fatally (a rejected key); the episode is re-run when the same command runs again, and the run exits non-zero
  while any remain;
- *rejected*: the server refused this episode's request deterministically (a 4xx other than 429 and other than a
  length limit, which ends as the model outcome ``model_length``): final after its attempt, with the reason
  recorded; the invocation that met it exits non-zero, a resume does not re-run it (``--rerun-rejected`` does).
  A model-side outcome: scored as unanswered (0 in Task and Strict) and kept in every denominator, so a model
  never scores higher because a server refused its hardest cases.

An episode that passes ``--episode-timeout`` (:data:`EPISODE_TIMEOUT`, its ``stop_reason``) is the model's
outcome -- scored on the answer it had by then (none: 0) and kept in n, as ``model_length`` and ``refused`` are --
unless the environment caused it: when the viewer's calls took at least half the limit
(:data:`ENVIRONMENT_SHARE`), it is INVALID (an environment fault), whatever the model did.

On disk, ``episodes/<id>/result.json`` holds a finished (scored or INVALID) episode and ``error.json`` an
errored one; the first finished attempt replaces the error. The progress line and ``summary.json`` both read
the same :class:`Tally`, so they always agree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..core.names import confined
from ..core.sinks import write_json
from ..providers.messages import Usage

SCORED, INVALID, ERROR, REJECTED = "scored", "invalid", "error", "rejected"
PROVIDER_FAILURES = (ERROR, REJECTED)
EPISODE_TIMEOUT = "episode_timeout"  # a stop_reason: the episode passed --episode-timeout (see the module doc)
ENVIRONMENT_SHARE = 0.5  # of the limit, spent in viewer calls: the timeout is the environment's fault (INVALID)


def timeout_fault(outcome: dict, limit_s: float | None) -> str | None:
    """The INVALID reason of an episode that timed out because of the environment, else None (see the module
    doc): its viewer calls took at least :data:`ENVIRONMENT_SHARE` of the limit."""
    if outcome.get("stop_reason") != EPISODE_TIMEOUT or not limit_s:
        return None
    tool_seconds = outcome.get("tool_seconds") or 0.0
    if tool_seconds < ENVIRONMENT_SHARE * limit_s:
        return None
    return (f"environment fault: the episode passed --episode-timeout {limit_s:g} s with {tool_seconds:.1f} s "
            "in viewer calls")
EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def write_json_atomic(path: Path, value: dict) -> None:
    """Write-then-rename (:func:`..sinks.write_json`, strict JSON): a reader (or a resumed run) sees the whole
    file or none of it."""
    write_json(path, value)


def outcome_of(record: dict) -> str:
    error = record.get("error")
    if error:
        deterministic = isinstance(error, dict) and error.get("retryable") is False and not error.get("fatal")
        return REJECTED if deterministic else ERROR
    return INVALID if record.get("invalid") else SCORED


def episode_usage(record: dict) -> Usage:
    """Every model call the episode paid for, over all its attempts (errored ones included)."""
    return Usage.from_json(record.get("usage_all_attempts") or (record.get("outcome") or {}).get("usage"))


class EpisodeStore:
    """The episode files of a run directory."""

    def __init__(self, out: Path):
        self.out = Path(out)

    def directory(self, episode_id: str) -> Path:
        """``--out/episodes/<episode_id>``, confined there whatever the id holds (:func:`..names.confined`)."""
        return confined(self.out / "episodes", episode_id)

    def result_path(self, episode_id: str) -> Path:
        return self.directory(episode_id) / "result.json"

    def error_path(self, episode_id: str) -> Path:
        return self.directory(episode_id) / "error.json"

    def load(self, episode_id: str) -> dict | None:
        """The episode's latest record: finished, else errored, else None (never run or interrupted)."""
        for path in (self.result_path(episode_id), self.error_path(episode_id)):
            if path.exists():
                return json.loads(path.read_text(encoding="utf-8"))
        return None

    def write(self, record: dict) -> dict:
        """Persist one attempt's record; usage of earlier errored attempts is carried into it."""
        episode_id = record["episode_id"]
        earlier = self.error_path(episode_id)
        usage = Usage.from_json((record.get("outcome") or {}).get("usage"))
        if earlier.exists():
            usage.add(episode_usage(json.loads(earlier.read_text(encoding="utf-8"))))
        record = {**record, "usage_all_attempts": usage.to_json()}
        if outcome_of(record) in PROVIDER_FAILURES:
            write_json_atomic(earlier, record)
        else:
            write_json_atomic(self.result_path(episode_id), record)
            earlier.unlink(missing_ok=True)
        return record


@dataclass
class Tally:
    """Counts over a run's episodes (this invocation's and earlier ones'), keyed by episode id."""

    total: int
    records: dict[str, dict] = field(default_factory=dict)

    def record(self, episode_id: str, record: dict) -> None:
        self.records[episode_id] = record

    def count(self, outcome: str) -> int:
        return sum(1 for record in list(self.records.values()) if outcome_of(record) == outcome)

    @property
    def finished(self) -> int:
        return self.count(SCORED) + self.count(INVALID)

    @property
    def missing(self) -> int:
        return self.total - len(self.records)

    def means(self) -> tuple[float | None, float | None]:
        # list(): a snapshot, since the terminal progress line reads the tally from episode threads
        scores = [record["score"] for record in list(self.records.values())
                  if outcome_of(record) in (SCORED, REJECTED) and record.get("score")]
        if not scores:
            return None, None
        return sum(s["task"] for s in scores) / len(scores), sum(s["strict"] for s in scores) / len(scores)

    def usage(self) -> Usage:
        total = Usage()
        for record in self.records.values():
            total.add(episode_usage(record))
        return total

    def errors(self, outcome: str = ERROR) -> list[dict]:
        return [
            {"episode_id": episode_id, **(record.get("error") or {})}
            for episode_id, record in sorted(self.records.items())
            if outcome_of(record) == outcome
        ]

    def to_json(self) -> dict:
        """The outcome fields of summary.json."""
        usage = self.usage()
        return {
            "scored": self.count(SCORED),
            "invalid": self.count(INVALID),
            "errors": self.count(ERROR),
            "rejected": self.count(REJECTED),
            "missing": self.missing,
            "error_episodes": self.errors(),
            "rejected_episodes": self.errors(REJECTED),
            "usage": usage.to_json(),
            "cost_usd": None if usage.cost_usd is None else round(usage.cost_usd, 6),
        }


def parse_fail_on_error(text: str) -> float:
    """``--fail-on-error``: an integer N >= 1, or a fraction in (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--fail-on-error takes a count (e.g. 5) or a fraction (e.g. 0.1), not {text!r}") from None
    if not (0 < value < 1 or (value >= 1 and value.is_integer())):
        raise ValueError(f"--fail-on-error must be an integer >= 1 or a fraction between 0 and 1, not {text}")
    return value


@dataclass
class ErrorPolicy:
    """When a run stops early. ``fail_on_error`` N >= 1: once N episodes of this invocation ended in error;
    a fraction f: once more than f of the run's episodes ended in error in this invocation (errors left by
    earlier invocations are being re-run, so they do not count). A fatal provider error (rejected key, unknown
    model) always stops the run: no later episode could succeed."""

    fail_on_error: float | None = None
    fresh_errors: int = 0
    stop_reason: str | None = None

    def observe(self, record: dict, tally: Tally) -> str | None:
        """Account one finished attempt; return the reason to stop starting episodes, once."""
        if outcome_of(record) not in PROVIDER_FAILURES or self.stop_reason:
            return None
        self.fresh_errors += 1
        error = record.get("error") or {}
        limit = self.fail_on_error
        if error.get("fatal"):
            self.stop_reason = f"the model provider cannot serve this run: {error.get('message')}"
        elif limit is not None and limit >= 1 and self.fresh_errors >= limit:
            self.stop_reason = f"{self.fresh_errors} episodes ended in error (--fail-on-error {limit:g})"
        elif limit is not None and limit < 1 and self.fresh_errors > limit * tally.total:
            self.stop_reason = (f"{self.fresh_errors} of {tally.total} episodes ended in error "
                                f"(--fail-on-error {limit:g})")
        return self.stop_reason


def exit_status(summary: dict) -> int:
    """0 only when every episode finished (scored or INVALID) or was rejected by an earlier invocation: errors,
    episodes not run, and rejections met by this invocation are non-zero."""
    if summary.get("interrupted"):
        return EXIT_INTERRUPTED
    failed = summary.get("errors") or summary.get("missing") or summary.get("rejected_now")
    return EXIT_ERRORS if failed else EXIT_OK

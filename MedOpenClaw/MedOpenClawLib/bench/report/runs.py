"""Reading ``bench run`` output directories into runs and episodes with one value per metric per episode.

A run directory holds ``run.json`` (identity), ``summary.json`` and ``episodes/<id>/result.json``. Everything the
tables, plots and pages show is computed here from the per-episode records, so every number can carry its n and a
bootstrap interval. Optional fields (provider usage, cost, latency) are read when present and skipped otherwise.
"""

from __future__ import annotations

import functools
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ...core.audit import read_trace
from ..agents import OFFLINE_AGENTS
from ..cases import CaseFormatError
from ..model_families import FAMILIES, default_family
from ..modules import ModuleSpec, known, specs
from ..outcomes import ERROR, INVALID, REJECTED, SCORED, outcome_of
from ..scoring.batch import package_fingerprint
from ..scoring.process import process_metrics
from ..tasks import operator_names
from .audits import audit_metrics, episode_audit

# per-episode usage keys (from the episode outcome) and the names they may have in provider usage records
USAGE_KEYS = {
    "input_tokens": ("input_tokens", "prompt_tokens"),
    "output_tokens": ("output_tokens", "completion_tokens"),
    "reasoning_tokens": ("reasoning_tokens",),
    "cached_tokens": ("cached_tokens", "cache_read_tokens"),
    "model_calls": ("calls", "model_calls"),
    "model_seconds": ("model_seconds", "latency_s", "latency_seconds"),
    "cost_usd": ("cost_usd", "cost"),
}
INTEGER_METRICS = frozenset({"input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens", "model_calls",
                             "calls", "images"})
MODEL_SIDE_STOPS = ("model_length", "refused")  # outcome stop reasons that end an episode on the model's side
ZERO_BY_RULE = ("task", "strict")  # what a rejected episode without a score of its own scores (0)
PROCESS_METRICS = ("calls", "images", "planning_f1", "execution", "progress_rate", "budget_exhausted")


@dataclass
class Episode:
    episode_id: str
    case_id: str
    result: dict
    trace: Path | None
    metrics: dict[str, float | None] = field(default_factory=dict)
    operators: frozenset[str] = frozenset()  # Track B operators the agent ran successfully
    audit: dict | None = None  # the trace audit (provenance, findings, milestones): report.findings

    @property
    def score(self) -> dict:
        return _mapping(self.result.get("score"))

    @property
    def parsed(self) -> dict:
        return _mapping(_mapping(self.score.get("details")).get("parsed"))

    @property
    def outcome(self) -> str:
        """scored | rejected (the server refused the model's request for good: model-side, scored 0) | invalid
        (environment fault: leaves the denominator) | error (provider failure, re-run later: not final)."""
        kind = outcome_of(self.result)
        if kind == SCORED and _mapping(self.result.get("outcome")).get("status") == "error":
            return ERROR
        return INVALID if kind == SCORED and self.score.get("invalid") else kind

    @property
    def counted(self) -> bool:
        """Whether the episode is in its cell's n: every final model-side outcome is (INVALID and pending
        provider errors are not)."""
        return self.outcome in (SCORED, REJECTED)

    def model_side(self, spec: ModuleSpec | None) -> str | None:
        """Why a counted episode scored by rule rather than by its answer: rejected, model_length, refused or
        unparseable (no answer found in the reply); all score 0 in Task and Strict and stay in n. None for an
        answered episode."""
        if self.outcome == REJECTED:
            return "rejected"
        stop = _mapping(self.result.get("outcome")).get("stop_reason")
        if stop in MODEL_SIDE_STOPS:
            return str(stop)
        if spec is None or not self.score:
            return None
        return None if spec.answered(self.parsed) else "unparseable"

    @property
    def left_out(self) -> str | None:
        """Why the episode is not in n: ``INVALID: <fault>`` or a provider error still to be re-run."""
        if self.outcome == INVALID:
            reason = str(self.result.get("invalid") or self.score.get("invalid_reason") or "environment fault")
            return "INVALID: " + reason.split(":")[0].strip()[:40]
        return "provider error, not re-run yet" if self.outcome == ERROR else None


@dataclass
class Run:
    path: Path
    name: str
    identity: dict
    summary: dict
    episodes: list[Episode]
    privileged: bool
    spec: ModuleSpec | None = None  # its module's spec, looked up where the run is loaded (None: unknown module)

    @property
    def module(self) -> str:
        return str(self.identity.get("module") or self.summary.get("module") or "?")

    @property
    def agent(self) -> str:
        return str(self.identity.get("agent") or "?")

    @property
    def track(self) -> str:
        return str(self.identity.get("track") or "A")

    @property
    def max_rounds(self) -> int | None:
        value = self.identity.get("max_rounds")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def max_tool_calls(self) -> int | None:
        """``--max-tool-calls``: the tool calls an episode may make (None: bounded by rounds only)."""
        value = self.identity.get("max_tool_calls")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def external(self) -> bool:
        """Scores of a pipeline outside the harness (`bench score`): no agent, no tools, no rounds."""
        return self.agent == "external"

    @property
    def has_rounds(self) -> bool:
        """Whether the run's episodes had tool rounds (not Track C's one answer turn, not a scored pipeline)."""
        return self.track != "C" and not self.external and bool(self.max_rounds)

    @property
    def model_family(self) -> str:
        """general | medical | native-3d: run.json's ``--model-family``, else from the model's name."""
        recorded = self.identity.get("model_family")
        return recorded if recorded in FAMILIES else default_family(self.model)

    @property
    def provider(self) -> str | None:
        return _text(_mapping(self.identity.get("provider")).get("kind"))

    @property
    def model(self) -> str | None:
        return _text(_mapping(self.identity.get("provider")).get("model"))

    @property
    def invocations(self) -> list[dict]:
        """run.json's provenance of each `bench run` invocation (none for runs written before it was kept)."""
        recorded = self.identity.get("invocations")
        return [item for item in recorded if isinstance(item, dict)] if isinstance(recorded, list) else []

    @property
    def image_history(self) -> str | None:
        """The conversation policy's images per request (``all`` or K); runs of different policies never pool."""
        return self._conversation("image_history")

    @property
    def tool_history(self) -> str | None:
        """The conversation policy's rounds of whole tool outputs (``all`` or N; None for runs before it)."""
        return self._conversation("tool_history")

    @property
    def toolset(self) -> str | None:
        """The tools the agent was shown (``paper`` or ``extended``; None for runs before the choice)."""
        value = self.identity.get("toolset")
        return None if value is None else str(value)

    def _conversation(self, key: str) -> str | None:
        value = _mapping(_mapping(self.identity.get("provider")).get("conversation")).get(key)
        return None if value is None else str(value)

    @property
    def package(self) -> str:
        """Which case package the run scored: run.json's fingerprint, else the manifest's fingerprint where
        ``cases_dir`` still holds it, else that path."""
        cases_dir = str(self.identity.get("cases_dir") or "?")
        return str(self.identity.get("package") or package_fingerprint(cases_dir) or cases_dir)

    @property
    def operation(self) -> str | None:
        """Track B: the Table 3 operation the run enabled (``segmentation``, ``registration``, ``vista3d``,
        ``custom``), ``all`` for every operator at once; None on the other tracks."""
        if self.track != "B":
            return None
        return str(self.identity.get("operation") or "all")

    @property
    def images(self) -> str:
        """The image space of the scored cases (``native``: a registration module's unregistered control) as
        run.json records it, else as the package's manifest says (runs written before run.json kept it), else
        atlas."""
        return str(self.identity.get("image_space") or _manifest_field(self.identity.get("cases_dir"), "images")
                   or "atlas")

    @property
    def backbone(self) -> tuple:
        """What 'the same backbone' means across tracks: the model behind a provider, else the offline agent."""
        return ("model", self.model, self.provider) if self.model else ("agent", self.agent, None)

    @property
    def scored(self) -> list[Episode]:
        """The episodes in the run's n (answered, or ended by a final model-side outcome)."""
        return [episode for episode in self.episodes if episode.counted]

    def count(self, outcome: str) -> int:
        return sum(1 for episode in self.episodes if episode.outcome == outcome)

    def values(self, metric: str, every_episode: bool = False) -> list[float]:
        """The metric per episode over the counted episodes (or every episode: what a run paid includes errored
        and INVALID ones), skipping episodes where it does not apply (None)."""
        episodes = self.episodes if every_episode else self.scored
        return [episode.metrics[metric] for episode in episodes if episode.metrics.get(metric) is not None]

    def case_values(self, metric: str) -> list[tuple[str, float]]:
        """(case, value) per counted episode: what :func:`.stats.estimate` reduces to one value per case."""
        return [(episode.case_id, episode.metrics[metric]) for episode in self.scored
                if episode.metrics.get(metric) is not None]


def case_values(runs: list[Run], metric: str) -> list[tuple[str, float]]:
    """The (case, value) pairs of several runs pooled into one cell: runs over the same package add repeats of its
    cases, not cases; runs over different packages keep their cases apart (``pooling_warnings`` names them)."""
    packages = {run.package for run in runs}
    return [(case if len(packages) == 1 else f"{run.package}:{case}", value)
            for run in runs for case, value in run.case_values(metric)]


def denominator(runs: list[Run]) -> dict[str, dict[str, int]]:
    """How a cell's n came about: ``left_out`` (reason -> episodes not in n) and ``scored_zero`` (model-side
    outcome -> episodes in n scored 0 by rule)."""
    left = Counter(episode.left_out for run in runs for episode in run.episodes if episode.left_out)
    zero = Counter(kind for run in runs for episode in run.scored if (kind := episode.model_side(run.spec)))
    return {"left_out": dict(sorted(left.items())), "scored_zero": dict(sorted(zero.items()))}

def find_runs(paths: list[str | os.PathLike]) -> list[Path]:
    """Every run directory at or below the given paths (a run has ``episodes/`` and ``run.json`` or
    ``summary.json``); a report directory written earlier is never mistaken for one."""
    runs: list[Path] = []
    for given in paths:
        directory = Path(given).resolve()
        if not directory.is_dir():
            raise CaseFormatError(f"{given} is not a directory")
        found = [directory] if _is_run(directory) else [
            path for path in sorted(directory.rglob("episodes")) if path.is_dir() and _is_run(path.parent)
        ]
        runs += [path.parent if path.name == "episodes" else path for path in found]
        if not found:
            raise CaseFormatError(f"{given} holds no bench run (run.json or summary.json, and episodes/)")
    unique = list(dict.fromkeys(runs))
    return [run for run in unique if not any(other != run and other in run.parents for other in unique)]


def _is_run(directory: Path) -> bool:
    return (directory / "episodes").is_dir() and any(
        (directory / name).is_file() for name in ("run.json", "summary.json")
    )


def run_names(runs: list[Path]) -> list[str]:
    """Short unique names: each run's path relative to the deepest directory that holds all of them."""
    if len(runs) == 1:
        return [runs[0].name]
    common = Path(os.path.commonpath([str(run) for run in runs]))
    return [run.relative_to(common).as_posix() for run in runs]


@functools.cache
def _manifest_field(cases_dir: str | None, key: str):
    """One top-level field of the manifest of the package a run scored (None when it is no longer there)."""
    if not cases_dir:
        return None
    try:
        return json.loads((Path(cases_dir) / "manifest.json").read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise CaseFormatError(f"{path}: unreadable JSON ({error})") from error
    return value if isinstance(value, dict) else {}


def load_run(path: Path, name: str) -> Run:
    identity = _read_json(path / "run.json")
    summary = _read_json(path / "summary.json")
    module = identity.get("module") or summary.get("module")
    spec = known(module)
    # the episodes the run's last invocation covers (a folder run once with --limit 10 and again with --limit 2
    # holds ten); a summary written before the list was kept covers every episode folder
    covered = summary.get("episode_ids")
    covered = set(covered) if isinstance(covered, list) else None
    episodes = []
    for directory in sorted(child for child in (path / "episodes").iterdir() if child.is_dir()):
        if covered is not None and directory.name not in covered:
            continue
        # a finished episode has result.json; an errored one (provider failure, re-run later) only error.json
        result = _read_json(directory / "result.json") or _read_json(directory / "error.json")
        if not result.get("case_id"):
            continue
        trace = path / result["trace"] if result.get("trace") else None
        episode = Episode(str(result.get("episode_id") or result["case_id"]), result["case_id"], result,
                          trace if trace is not None and trace.is_file() else None)
        episode.metrics = episode_metrics(module, spec, episode, str(identity.get("track") or "A"))
        episodes.append(episode)
    return Run(path, name, identity, summary, episodes, is_privileged(identity), spec)


def is_privileged(identity: dict) -> bool:
    """Whether the run's agent read the hidden ground truth (the oracle), directly or through a chain of replays
    of one. The chain is followed iteratively and each run once: a ``replay_from`` naming its own run (or any
    cycle) ends the chain as not privileged instead of recursing without end."""
    seen: set[Path] = set()
    while isinstance(identity, dict):
        agent = OFFLINE_AGENTS.get(str(identity.get("agent")))
        if agent is not None:
            return bool(agent.privileged)
        source = identity.get("replay_from")
        if identity.get("agent") != "replay" or not isinstance(source, str) or not source:
            return False
        run_file = (Path(source) / "run.json").resolve()
        if run_file in seen:
            return False
        seen.add(run_file)
        identity = _read_json(run_file)
    return False


def episode_metrics(module: str | None, spec: ModuleSpec | None, episode: Episode,
                    track: str = "A") -> dict[str, float | None]:
    """Scores (Task/Strict/Loc and the Table 5 sub-columns), process metrics from the trace, usage and cost.
    ``module`` is the name the run records, ``spec`` its spec (None for a name no module folder defines: no
    process metrics then)."""
    score = episode.score
    details = _mapping(score.get("details"))
    metrics: dict[str, float | None] = {key: _number(score.get(key)) for key in ("task", "strict", "loc")}
    if episode.outcome == REJECTED and not score:  # recorded before rejected episodes were scored as unanswered
        metrics.update(dict.fromkeys(ZERO_BY_RULE, 0.0))
    for sub in (sub for spec in specs() for sub in spec.sub_metrics):  # every module's Table 5 sub-columns
        metrics[sub.key] = _number(_mapping(details.get(sub.group)).get(sub.key) if sub.group else details.get(sub.key))
    if episode.trace is not None and module and episode.counted:
        records = trace_records(episode.trace)
        try:
            process = process_metrics(spec, records, spec.answered(episode.parsed)) if spec is not None else {}
        except (KeyError, TypeError, ValueError):  # a record shape the process metrics do not know
            process = {}
        if track == "B":
            episode.operators = operators_called(records)
        metrics.update({key: _number(process.get(key)) for key in PROCESS_METRICS})
        episode.audit = episode_audit(spec, episode.result, episode.parsed, records)
        metrics.update(audit_metrics(episode.audit))
        trace_tokens = {key: _number(process.get(key)) for key in ("input_tokens", "output_tokens")}
    else:
        trace_tokens = {}
    # what the episode paid for over all its attempts when recorded, else its final attempt's usage
    usage = _mapping(episode.result.get("usage_all_attempts") or _mapping(episode.result.get("outcome")).get("usage"))
    for key, names in USAGE_KEYS.items():
        metrics[key] = next((_number(usage[name]) for name in names if _number(usage.get(name)) is not None),
                            trace_tokens.get(key))
    if metrics["cost_usd"] is None:
        metrics["cost_usd"] = _number(episode.result.get("cost_usd"))
    return metrics


def trace_records(path: Path | None) -> list[dict]:
    """The records of an episode's audit trace; an unreadable trace, or a line that is not a record, is left out
    (the report shows what it can; `trace verify` is the integrity check)."""
    if path is None:
        return []
    try:
        return [record for record in read_trace(path) if isinstance(record, dict)]
    except (OSError, ValueError):
        return []


def operators_called(records: list[dict]) -> frozenset[str]:
    calls = {record.get("action") for record in records
             if record.get("kind") == "action" and record.get("actor") == "agent" and record.get("status") == "ok"}
    return frozenset(calls & operator_names()) if calls else frozenset()


def _text(value) -> str | None:
    return None if value is None else str(value)


def _mapping(value) -> dict:
    """A JSON object from a record, or an empty one when the record holds something else there."""
    return value if isinstance(value, dict) else {}


def _number(value) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and value == value and abs(value) != float("inf"):
        return float(value)
    return None

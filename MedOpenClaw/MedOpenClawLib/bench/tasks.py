"""What a benchmark run is made of: its configuration and its episodes (a case and a repeat).

Both are plain, picklable values, so any executor -- local worker processes today, a Ray cluster -- can carry
them to wherever an episode runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..apps import entries, paper_tools
from .cases import Case, package_image_space
from .model_families import default_family
from .modules import PATHOLOGY, ModuleSpec, get

if TYPE_CHECKING:  # the CLI reads TRACKS at --help time: no HTTP client import for that
    from ..providers import ProviderConfig

TRACKS = ("A", "B", "C")  # C: runtime-agnostic (App. C.2): one turn on slice montages


def parse_limit(text: str) -> int | tuple[int, int]:
    """``--limit``: ``N`` (the first N cases) or ``A-B`` (cases A to B of the package, 1-based, inclusive)."""
    first, dash, last = text.partition("-")
    if not first.isdigit() or (dash and not last.isdigit()):
        raise ValueError(f"--limit takes N or A-B (cases A to B, counted from 1), not {text!r}")
    if not dash:
        if int(first) < 1:
            raise ValueError("--limit N needs N >= 1")
        return int(first)
    start, stop = int(first), int(last)
    if not 1 <= start <= stop:
        raise ValueError(f"--limit {text}: the range must run from 1 or more up to at least its start")
    return start, stop


def select_cases(cases: list[Case], limit: int | tuple[int, int] | None = None,
                 case_ids: tuple[str, ...] | None = None) -> list[Case]:
    """The cases a run covers, in package order: those named by ``case_ids`` (every one must exist), then the
    ``limit`` count or 1-based range of what is left."""
    if case_ids:
        known = {case.case_id for case in cases}
        unknown = [case_id for case_id in case_ids if case_id not in known]
        if unknown:
            raise ValueError(f"--case-ids: the package has no case {', '.join(map(repr, unknown))} (it has "
                             f"{len(cases)} cases, e.g. {', '.join(case.case_id for case in cases[:3]) or 'none'})")
        wanted = set(case_ids)
        cases = [case for case in cases if case.case_id in wanted]
    if isinstance(limit, int):
        return cases[:limit]
    if limit is not None:
        if limit[0] > len(cases):
            raise ValueError(f"--limit {limit[0]}-{limit[1]}: there are only {len(cases)} cases to choose from")
        return cases[limit[0] - 1:limit[1]]
    return cases


# Table 3's operations: what `--operators` enables on Track B, by group name (or give operator action names)
OPERATION_GROUPS = {
    "segmentation": ("segment_region", "quantify"),
    "registration": ("register_volumes", "apply_transform", "resample_volume"),
    "vista3d": ("vista3d_segment", "quantify"),
}


def operator_names() -> frozenset[str]:
    """The Track B operators (role ``operator`` in the action catalog, ``resources/actions.json``)."""
    return frozenset(entry["name"] for entry in entries() if entry.get("role") == "operator")


def parse_operators(text: str) -> tuple[str, ...]:
    """``--operators NAME[,NAME]``: group names (:data:`OPERATION_GROUPS`) and operator action names, expanded
    to the sorted operator names; an unknown name is refused with the choices."""
    known = operator_names()
    names: set[str] = set()
    for part in (item.strip() for item in text.split(",")):
        if part in OPERATION_GROUPS:
            names.update(OPERATION_GROUPS[part])
        elif part in known:
            names.add(part)
        else:
            raise ValueError(f"--operators: {part!r} is neither an operation ({', '.join(OPERATION_GROUPS)}) nor "
                             f"an operator ({', '.join(sorted(known))})")
    return tuple(sorted(names))


def operation_of(operators: list[str] | tuple[str, ...] | None) -> str:
    """The Table 3 operation a run's ``--operators`` selection is (a group it equals), else ``custom``; a Track
    B run without a selection has every operator (``all``)."""
    if not operators:
        return "all"
    return next((name for name, group in OPERATION_GROUPS.items() if set(group) == set(operators)), "custom")


# what the agent is shown: the paper's tables (9 and 10) or every action of the application
TOOLSETS = ("paper", "extended")


def check_toolset(toolset: str) -> None:
    if toolset not in TOOLSETS:
        raise ValueError(f"toolset must be one of {', '.join(TOOLSETS)}, got {toolset!r}")


def offered_tools(tools: list[dict], application: str, toolset: str,
                  operators: tuple[str, ...] | None = None) -> list[dict]:
    """The environment's ``tools`` an episode offers: ``paper`` keeps Table 9/10's and the Track B operators,
    ``extended`` every one (radiology: with MedOpenClaw's evidence-capture actions; pathology: with recovery and
    setup); ``operators`` (Table 3: one operation at a time) hides the other operators either way."""
    check_toolset(toolset)
    every_operator = operator_names()
    hidden = every_operator - set(operators) if operators else frozenset()
    visible = set(paper_tools(application)) | every_operator if toolset == "paper" else None
    return [tool for tool in tools if tool["name"] not in hidden and (visible is None or tool["name"] in visible)]


def check_options(module: str, track: str = "A", toolset: str = "paper",
                  operators: tuple[str, ...] | None = None) -> None:
    """The run options a module must agree with; `bench run` checks them before it prepares any cases (an
    empty cache would otherwise generate the synthetic cohort to report a usage error)."""
    if track not in TRACKS:
        raise ValueError(f"track must be one of {', '.join(TRACKS)}")
    if track == "C" and get(module).application == PATHOLOGY:
        raise ValueError("Track C (2D slice montages) covers the radiology modules only")
    check_toolset(toolset)
    if operators and track != "B":
        raise ValueError("--operators selects Track B's operators: add --track B")


# episodes per case: enough for pass@k and consistency studies; every (case, repeat) task is listed up front, so an
# unbounded count would exhaust memory before the first episode
MAX_REPEATS = 1000


@dataclass
class RunConfig:
    module: str
    agent: str
    out: Path
    cases_dir: Path
    track: str = "A"
    limit: int | tuple[int, int] | None = None  # the first N cases, or a 1-based inclusive range (parse_limit)
    case_ids: tuple[str, ...] | None = None  # only these cases
    repeats: int = 1
    workers: int | str = 1  # or "auto" (concurrency.resolve_workers)
    slicer: str | None = None
    max_rounds: int = 20
    max_tool_calls: int | None = None  # --max-tool-calls: tool calls per episode (Table 7's budget), beside rounds
    model_family: str | None = None  # --model-family (model_families.FAMILIES); None: from the model's name
    seed: int = 0
    provider: ProviderConfig | None = None
    replay_from: str | None = None  # --agent replay: the run whose recorded model outputs are replayed
    call_timeout_s: float = 300.0
    episode_timeout_s: float | None = None  # wall clock per episode (EpisodeConfig.timeout_s); None: no limit
    startup_timeout_s: float = 120.0
    save_images: bool = True
    fail_on_error: float | None = None  # see outcomes.ErrorPolicy
    rerun_rejected: bool = False  # re-run episodes a server rejected deterministically (outcomes.REJECTED)
    operators: tuple[str, ...] | None = None  # Track B: only these operators are offered (parse_operators)
    toolset: str = "paper"  # TOOLSETS: what the agent is shown

    def __post_init__(self):
        check_options(self.module, self.track, self.toolset, self.operators)
        # absolute, links resolved: the paths written under it (traces, results) are compared with it
        self.out = Path(self.out).resolve()
        if not 1 <= self.repeats <= MAX_REPEATS:
            raise ValueError(f"repeats must be from 1 to {MAX_REPEATS} episodes per case, not {self.repeats}")

    @property
    def spec(self) -> ModuleSpec:
        """The run's module: looked up here, where a run starts, and handed down from here (the config itself
        stays a plain picklable value that executors carry to their workers)."""
        return get(self.module)

    def identity(self) -> dict:
        """What a resumed run must share with the first invocation (not how many workers, timeouts, ...)."""
        return {
            "module": self.module,
            "agent": self.agent,
            "track": self.track,
            "cases_dir": str(Path(self.cases_dir).resolve()),
            "max_rounds": self.max_rounds,
            "seed": self.seed,
            "provider": self.provider.identity() if self.provider else None,
            "replay_from": self.replay_from,
            "toolset": self.toolset,
            # it can end episodes, so it changes scores; absent when unset, as runs before it recorded none
            **({"episode_timeout_s": self.episode_timeout_s} if self.episode_timeout_s is not None else {}),
            # recorded where set or not the default of the model's name, so runs written before them resume
            **({"max_tool_calls": self.max_tool_calls} if self.max_tool_calls is not None else {}),
            **({"model_family": self.model_family} if self.model_family is not None and self.model_family
               != default_family(self.provider.model if self.provider else None) else {}),
            **package_image_space(self.cases_dir),
            **({"operators": list(self.operators), "operation": operation_of(self.operators)}
               if self.operators else {}),
        }


@dataclass(frozen=True)
class EpisodeTask:
    case: Case
    repeat: int
    prior_attempts: int = 0  # attempts of earlier invocations that ended in error (their traces are kept)

    @property
    def episode_id(self) -> str:
        return f"{self.case.case_id}__r{self.repeat}"

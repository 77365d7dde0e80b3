"""What a benchmark run is made of: its configuration and its episodes (a case and a repeat).

Both are plain, picklable values, so any executor -- local worker processes today, a Ray cluster -- can carry
them to wherever an episode runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .cases import PATHOLOGY_MODULES, Case

if TYPE_CHECKING:  # the CLI reads TRACKS at --help time: no HTTP client import for that
    from ..providers import ProviderConfig

TRACKS = ("A", "B", "C")  # C: runtime-agnostic (App. C.2): one turn on slice montages


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
    workers: int | str = 1  # or "auto" (concurrency.resolve_workers)
    slicer: str | None = None
    max_rounds: int = 20
    seed: int = 0
    provider: ProviderConfig | None = None
    replay_from: str | None = None  # --agent replay: the run whose recorded model outputs are replayed
    call_timeout_s: float = 300.0
    startup_timeout_s: float = 120.0
    save_images: bool = True
    fail_on_error: float | None = None  # see outcomes.ErrorPolicy

    def __post_init__(self):
        check_track(self.track, self.module)

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
        }


@dataclass(frozen=True)
class EpisodeTask:
    case: Case
    repeat: int
    prior_attempts: int = 0  # attempts of earlier invocations that ended in error (their traces are kept)

    @property
    def episode_id(self) -> str:
        return f"{self.case.case_id}__r{self.repeat}"

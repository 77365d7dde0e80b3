"""Session policy: which tracks are offered, how many tool rounds an episode may use, which paths may be opened.

Kept apart from the registry so the same rules apply to every front-end (REST, MCP, chat panel, runner).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .result import ActionError

TRACKS = ("A", "B")


class DataRootPolicy:
    """Allow-list of directories that ``open_case``/``load_image`` may read; symlinks are resolved first."""

    def __init__(self, roots: list[str | os.PathLike] | None = None):
        self.roots = [Path(root).resolve() for root in (roots or [])]

    def resolve(self, path: str) -> Path:
        """Return the real path if it lies under an allowed root, otherwise refuse with ``path_not_allowed``."""
        if not isinstance(path, str) or not path:
            raise ActionError("invalid_argument", "a non-empty path string is required")
        candidate = Path(path)
        if not candidate.is_absolute() and self.roots:
            candidate = self.roots[0] / candidate
        real = candidate.resolve()
        if not any(real == root or root in real.parents for root in self.roots):
            raise ActionError(
                "path_not_allowed",
                f"{path!r} is outside the allowed data roots; ask the operator to add its directory",
            )
        if not real.exists():
            raise ActionError("not_found", f"{path!r} does not exist")
        return real

    def to_json(self) -> list[str]:
        return [str(root) for root in self.roots]


@dataclass
class SessionPolicy:
    """Per-episode controls: track gating and a budget of tool-calling rounds for the agent."""

    track: str = "A"
    max_rounds: int | None = None
    data_roots: DataRootPolicy = field(default_factory=DataRootPolicy)
    rounds_used: int = 0
    _last_round: object = None

    def __post_init__(self):
        if self.track not in TRACKS:
            raise ValueError(f"track must be one of {TRACKS}, got {self.track!r}")

    def charge_round(self, round_id: object) -> None:
        """Count a new agent round (calls sharing a ``round_id`` count once); refuse when the budget is spent."""
        if round_id is not None and round_id == self._last_round:
            return
        if self.max_rounds is not None and self.rounds_used >= self.max_rounds:
            raise ActionError(
                "budget_exhausted",
                f"the episode budget of {self.max_rounds} tool rounds is spent; give the final answer now",
            )
        self.rounds_used += 1
        self._last_round = round_id

    def to_json(self) -> dict:
        return {
            "track": self.track,
            "max_rounds": self.max_rounds,
            "rounds_used": self.rounds_used,
            "data_roots": self.data_roots.to_json(),
        }

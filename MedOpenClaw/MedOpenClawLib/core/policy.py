"""Session policy: which tracks are offered, how many tool rounds an episode may use, which paths may be opened.

Kept apart from the registry so the same rules apply to every front-end (REST, MCP, chat panel, runner).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .hygiene import preview
from .names import name_problem
from .result import ActionError

TRACKS = ("A", "B")
# a case package as ``bench prepare`` writes it: agent-visible data/, ground truth in hidden/, manifest.json
PACKAGE_DATA, PACKAGE_HIDDEN, PACKAGE_MANIFEST = "data", "hidden", "manifest.json"


MAX_SCAN_ENTRIES = 100_000
# evidence items one session may hold: an episode records a handful; without a ceiling a looping agent grows
# memory, the scene's markups and every rollback checkpoint without end
MAX_EVIDENCE_ITEMS = 1000


@dataclass
class DirectoryScan:
    """What a directory scan found: files (as found, each resolving inside the roots), the directories
    visited, and how many entries were skipped because they resolve outside the roots or cannot be read."""

    files: list[Path]
    directories: list[Path]
    skipped: int = 0
    unsafe_names: list[str] = field(default_factory=list)  # previews of names refused by the name hygiene


def is_package(folder: Path) -> bool:
    """A case package: ``manifest.json`` and/or ``hidden/`` beside ``data/``."""
    return (folder / PACKAGE_MANIFEST).is_file() or (folder / PACKAGE_HIDDEN).is_dir()


def ground_truth(real: Path) -> Path | None:
    """The case package's ground truth that the resolved path ``real`` is (its manifest) or lies in (its
    ``hidden/`` folder, at any depth), or None. Decided from ``real``'s own ancestors -- a ``hidden`` folder beside
    the package's ``data/`` or ``manifest.json`` -- so it holds wherever the package sits in a data root, however
    deep or late a scan of that root would have reached it."""
    for folder in (real, *real.parents):
        if folder.name == PACKAGE_HIDDEN and (
                (folder.parent / PACKAGE_DATA).is_dir() or (folder.parent / PACKAGE_MANIFEST).is_file()):
            return folder
    if real.name == PACKAGE_MANIFEST and (real.parent / PACKAGE_DATA).is_dir():
        return real
    return None


class DataRootPolicy:
    """Allow-list of directories the session may read. The one path resolver of every file-reading action and
    every directory scan: symlinks are resolved first, so no path, link or scanned entry leads outside, nor into
    a case package's ground truth inside a root (:func:`ground_truth`)."""

    def __init__(self, roots: list[str | os.PathLike] | None = None):
        self.roots = [Path(root).resolve() for root in (roots or [])]

    def allows(self, real: Path, extra_roots: tuple[Path, ...] = ()) -> bool:
        """Whether a resolved path lies in (or is) one of the roots."""
        return any(real == root or root in real.parents for root in (*self.roots, *extra_roots))

    def resolve(self, path: str, extra_roots: tuple[str | os.PathLike, ...] = ()) -> Path:
        """The real path if it lies under an allowed root (or one of ``extra_roots``, e.g. the session's own
        artifact folder), otherwise ``path_not_allowed``; ``not_found`` if it does not exist."""
        if not isinstance(path, str) or not path:
            raise ActionError("invalid_argument", "a non-empty path string is required")
        problem = name_problem(path)
        if problem:
            raise ActionError("invalid_argument", f"path {preview(path)} {problem}")
        candidate = Path(path)
        if not candidate.is_absolute() and self.roots:
            candidate = self.roots[0] / candidate
        real = _real_path(candidate, path)
        problem = name_problem(str(real))
        if problem:  # a link whose target's name no action could type (or no viewer could take)
            raise ActionError("unsafe_name", f"{preview(path)} leads to {preview(str(real))}, which {problem}")
        extra = tuple(Path(root).resolve() for root in extra_roots)
        if not self.allows(real, extra):
            raise ActionError(
                "path_not_allowed",
                f"{preview(path)} is outside the allowed data roots; ask the operator to add its directory",
            )
        if ground_truth(real) is not None:
            raise ActionError("path_not_allowed", f"{preview(path)} is a case package's ground truth "
                                                  f"({PACKAGE_HIDDEN}/ or {PACKAGE_MANIFEST}): never opened")
        try:
            exists = real.exists()
        except OSError as error:
            raise ActionError("invalid_path", f"{preview(path)}: {error.strerror or error}") from error
        if not exists:
            raise ActionError("not_found", f"{preview(path)} does not exist")
        return real

    def scan(self, directory: Path, recursive: bool = True) -> DirectoryScan:
        """Every file below ``directory`` (a path :meth:`resolve` returned), breadth-first and sorted. Each entry
        is resolved: links leading outside the roots, dangling links and loops are skipped and counted;
        directory links inside the roots are followed once. A name the name hygiene refuses (bytes that are not
        UTF-8, control or bidirectional characters) is skipped and listed in ``unsafe_names``: it never reaches a
        reader (a non-UTF-8 name aborts Slicer's archetype reader) or a volume name."""
        found = DirectoryScan([], [])
        pending, visited, entries = [directory], {directory.resolve()}, 0
        while pending:
            current = pending.pop(0)
            found.directories.append(current)
            try:
                children = sorted(os.scandir(current), key=lambda entry: entry.name)
            except OSError:
                found.skipped += 1
                continue
            for child in children:
                entries += 1
                if entries > MAX_SCAN_ENTRIES:
                    raise ActionError("too_many_files", f"{directory.name} holds more than {MAX_SCAN_ENTRIES} "
                                                        "entries; open a sub-folder")
                path = Path(child.path)
                if name_problem(child.name):
                    found.unsafe_names.append(preview(child.name, 40))
                    continue
                try:
                    real = path.resolve(strict=True)
                    is_dir = real.is_dir()
                except (OSError, RuntimeError):  # dangling link, symlink loop, unreadable entry
                    found.skipped += 1
                    continue
                if not self.allows(real) or ground_truth(real) is not None:
                    found.skipped += 1
                elif is_dir:
                    if recursive and real not in visited:
                        visited.add(real)
                        pending.append(path)
                elif real.is_file():
                    found.files.append(path)
        return found

    def to_json(self) -> list[str]:
        return [str(root) for root in self.roots]


def _real_path(candidate: Path, shown: str) -> Path:
    try:
        return candidate.resolve()
    except RuntimeError as error:  # Python < 3.13 raises RuntimeError on a symlink loop
        raise ActionError("invalid_path", f"{preview(shown)}: symlink loop") from error
    except OSError as error:  # ENAMETOOLONG, ELOOP, EACCES
        raise ActionError("invalid_path", f"{preview(shown)}: {error.strerror or error}") from error


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

    def check_evidence_room(self, items: int) -> None:
        """Refuse a new evidence item once the session holds :data:`MAX_EVIDENCE_ITEMS`."""
        if items >= MAX_EVIDENCE_ITEMS:
            raise ActionError("evidence_full", f"the session already holds {items} evidence items (at most "
                                               f"{MAX_EVIDENCE_ITEMS}); give the final answer")

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

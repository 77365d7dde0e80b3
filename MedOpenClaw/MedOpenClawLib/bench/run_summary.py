"""How ``bench run`` ends on stdout: the summary JSON as its last line for programs (stdout not a terminal, or
``--json``), and for a person at a terminal a short table instead of a wrapped 1.5 KB blob, with the command that
comes next."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import TextIO

from ..core.sinks import terminal_text

COLUMNS = ("module", "n", "Task", "Strict", "Loc", "errors", "not run")


def _mean(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def summary_rows(summary: dict) -> list[tuple[str, ...]]:
    """One row per module (a run of several modules also gets their macro means)."""
    def row(name: str, part: dict, task: str = "task", strict: str = "strict", loc: str = "loc") -> tuple:
        return (name, str(part.get("n", part.get("scored", 0)) or 0), _mean(part.get(task)),
                _mean(part.get(strict)), _mean(part.get(loc)), str(part.get("errors") or 0),
                str(part.get("missing") or 0))

    modules = summary.get("modules")
    if not isinstance(modules, dict):
        return [row(summary.get("module", "?"), summary)]
    total = {"n": sum(int(part.get("n") or 0) for part in modules.values()), **summary}
    return [*(row(name, part) for name, part in modules.items()),
            row("all (macro)", total, "task_macro", "strict_macro", "loc_macro")]


def summary_table(summary: dict) -> str:
    rows = [COLUMNS, *summary_rows(summary)]
    widths = [max(len(row[index]) for row in rows) for index in range(len(COLUMNS))]
    return "\n".join("  ".join(cell.ljust(width) if index == 0 else cell.rjust(width)
                               for index, (cell, width) in enumerate(zip(row, widths))).rstrip() for row in rows)


def shown(path: Path) -> str:
    """``path`` as a user would type it here: relative below the working directory, else absolute."""
    relative = os.path.relpath(path)
    return path.as_posix() if relative.startswith("..") else Path(relative).as_posix()


def print_summary(summary: dict, out: Path, stream: TextIO, as_json: bool) -> None:
    """The summary JSON as the last line (``as_json``), else the table and the next command."""
    if as_json:
        print(json.dumps(summary, sort_keys=True), file=stream)
        return
    for line in summary_table(summary).splitlines():  # module names come from files: no control characters
        print(terminal_text(line), file=stream)
    print(terminal_text(f"next: {shlex.join(['medopenclaw', 'bench', 'report', shown(out)])}   (scores as JSON: "
                        f"{shown(out / 'summary.json')}, or --json)"), file=stream)

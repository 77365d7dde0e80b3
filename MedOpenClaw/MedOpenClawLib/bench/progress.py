"""Live progress of a benchmark run on stderr: done/total, ETA and the running Task/Strict means.

On a terminal it redraws one line; otherwise (CI logs, files) it prints one line per finished episode, so
logs stay readable. stdout is left alone: the runner's last stdout line is the aggregate JSON.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class Progress:
    def __init__(self, total: int, already_done: int = 0, stream: TextIO | None = None, width: int = 24):
        self.total = total
        self.done = already_done
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        self.fresh = 0  # episodes finished in this invocation (the ETA is based on these)
        self.task: list[float] = []
        self.strict: list[float] = []
        self.invalid = 0
        self._lock = threading.Lock()

    def line(self, label: str = "") -> str:
        elapsed = time.monotonic() - self.started
        remaining = self.total - self.done
        eta = elapsed / self.fresh * remaining if self.fresh else None
        filled = int(self.width * self.done / self.total) if self.total else self.width
        bar = "#" * filled + "." * (self.width - filled)

        def mean(values: list[float]) -> str:
            return f"{sum(values) / len(values):.3f}" if values else "-"

        return (f"[{bar}] {self.done}/{self.total} elapsed {_clock(elapsed)} "
                f"ETA {_clock(eta) if eta is not None else '?'} task {mean(self.task)} strict {mean(self.strict)} "
                f"invalid {self.invalid}" + (f" | {label}" if label else ""))

    def update(self, episode_id: str, score: dict | None, invalid: bool) -> None:
        with self._lock:
            self.done += 1
            self.fresh += 1
            if invalid:
                self.invalid += 1
            elif score is not None:
                self.task.append(score["task"])
                self.strict.append(score["strict"])
            self._write(self.line(episode_id))

    def start(self) -> None:
        self._write(self.line("resuming" if self.done else "starting"))

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def _write(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

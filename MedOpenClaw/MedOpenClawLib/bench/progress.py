"""Live progress of a benchmark run on stderr: done/total, ETA, the running Task/Strict means and the outcome
counts -- read from the same :class:`~.outcomes.Tally` that summary.json is written from, so they agree.

On a terminal it redraws one line, which also shows the latest episode's round, last action and tokens while
it runs; otherwise (CI logs, files) it prints one line per finished episode, so logs stay readable. stdout is
left alone: the runner's last stdout line is the aggregate JSON.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from typing import TextIO

from ..core.sinks import one_line
from .episode import EpisodeOutcome
from .outcomes import ERROR, INVALID, Tally
from .tasks import EpisodeTask


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _tokens(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 1000 else str(count)


def terminal_columns(stream: TextIO) -> int:
    """The width of ``stream``'s terminal; a terminal that reports 0 columns (a fresh pty, ``docker exec -t``) or
    none counts as ``COLUMNS``, else 80 columns (shutil's fallback)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0
    return columns if columns > 0 else shutil.get_terminal_size().columns or 80


def fit_to_terminal(stream: TextIO, text: str) -> str:
    """``text`` cut to the terminal's width (its end goes first): a line that wraps cannot be redrawn in place
    and stacks up instead."""
    columns = terminal_columns(stream)
    return text if len(text) < columns else text[: max(columns - 2, 1)] + "…"


class Progress:
    def __init__(self, tally: Tally, stream: TextIO | None = None, max_rounds: int = 0, width: int = 24):
        self.tally = tally
        self.stream = stream or sys.stderr
        self.max_rounds = max_rounds
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        self.fresh = 0  # episodes finished in this invocation (the ETA is based on these)
        self.resumed = bool(tally.records)
        self.finished = False  # after finish() nothing is drawn: what follows (notes, the summary) has the screen
        self._lock = threading.Lock()

    def line(self, label: str = "") -> str:
        tally = self.tally
        elapsed = time.monotonic() - self.started
        remaining = tally.total - tally.finished
        eta = elapsed / self.fresh * remaining if self.fresh else None
        filled = int(self.width * tally.finished / tally.total) if tally.total else self.width
        bar = "#" * filled + "." * (self.width - filled)
        task, strict = tally.means()

        def shown(value: float | None) -> str:
            return "-" if value is None else f"{value:.3f}"

        text = (f"[{bar}] {tally.finished}/{tally.total} elapsed {_clock(elapsed)} "
                f"ETA {_clock(eta) if eta is not None else '?'} task {shown(task)} strict {shown(strict)} "
                f"invalid {tally.count(INVALID)} errors {tally.count(ERROR)}" + (f" | {label}" if label else ""))
        return fit_to_terminal(self.stream, text) if self.tty else text


    def update(self, episode_id: str) -> None:
        """An episode's record joined the tally."""
        with self._lock:
            self.fresh += 1
            self._write(self.line(episode_id))

    def episode(self, task: EpisodeTask, outcome: EpisodeOutcome, action: str) -> None:
        """A running episode finished a model turn: on a terminal, show where it is."""
        if not self.tty:
            return
        usage = outcome.usage
        rounds = f"round {outcome.rounds}/{self.max_rounds}" if self.max_rounds else "answer turn"
        label = f"{task.episode_id} {rounds} {action[:40]}"
        if usage.calls or usage.input_tokens or usage.output_tokens:  # offline agents call no model
            label += f" tokens {_tokens(usage.input_tokens)} in/{_tokens(usage.output_tokens)} out"
        with self._lock:
            self._write(self.line(label))

    def note(self, text: str) -> None:
        """A message of its own line (interrupts, stop reasons, how to resume); while the run goes on, the
        progress line is drawn again below it."""
        with self._lock:
            redraw = self.tty and not self.finished
            if redraw:
                self.stream.write("\r\x1b[2K")
            self.stream.write(one_line(text) + "\n")
            if redraw:
                self.stream.write(one_line(self.line()))
            self.stream.flush()

    def start(self) -> None:
        self._write(self.line("resuming" if self.resumed else "starting"))

    def finish(self) -> None:
        """The last progress line stays as it is; a late report of a running episode draws nothing."""
        with self._lock:
            if self.tty and not self.finished:
                self.stream.write("\n")
                self.stream.flush()
            self.finished = True

    def _write(self, text: str) -> None:
        """One progress line; folder names, episode ids and a model's tool-call names pass through it, so its
        text is stripped of control characters first (:func:`...sinks.one_line`)."""
        if self.finished:
            return
        text = one_line(text)
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


class Activity:
    """A long step that is not an episode (generating a cohort, writing a report's pages) shown on stderr: on a
    terminal one line that redraws with the count done and the seconds so far; there and elsewhere (logs) a
    line with its duration when it ends. Use as a context manager; :meth:`advance` counts items when ``total``
    is known."""

    def __init__(self, label: str, total: int | None = None, stream: TextIO | None = None, tick_s: float = 0.5):
        self.label, self.total, self.done = label, total, 0
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.tick_s = tick_s
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def text(self) -> str:
        count = f" {self.done}/{self.total}" if self.total is not None else ""
        return f"{self.label}{count} ({time.monotonic() - self.started:.0f} s)"

    def advance(self, count: int = 1) -> None:
        with self._lock:
            self.done += count

    def _redraw(self) -> None:
        while not self._stop.wait(self.tick_s):
            self._draw()

    def _draw(self) -> None:
        with self._lock:
            self.stream.write("\r\x1b[2K" + fit_to_terminal(self.stream, self.text()))
            self.stream.flush()

    def __enter__(self) -> Activity:
        self.started = time.monotonic()
        if self.tty:
            self._draw()
            self._thread = threading.Thread(target=self._redraw, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind, error, traceback) -> None:
        """A finished step leaves one line; a failed one leaves none (its error is the line that matters)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self.tty:
                self.stream.write("\r\x1b[2K")
            if kind is None:
                self.stream.write(f"{self.text()}: done\n")
            self.stream.flush()

"""Live progress of a benchmark run on stderr: done/total, ETA, the running Task/Strict means and the outcome
counts -- read from the same :class:`~.outcomes.Tally` that summary.json is written from, so they agree.

On a terminal, rich's :class:`~rich.live.Live` redraws one line (which also shows the latest episode's round,
last action and tokens while it runs) and keeps it below any note printed meanwhile; otherwise (CI logs, files)
one line is printed per finished episode, so logs stay readable. stdout is left alone: the runner's last stdout
line is the aggregate JSON.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from ..core.sinks import terminal_line
from .outcomes import ERROR, INVALID, Tally
from .tasks import EpisodeTask

if TYPE_CHECKING:  # the runner's: `bench cohort` shows progress without importing the agents and their HTTP client
    from .episode import EpisodeOutcome


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _tokens(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 1000 else str(count)


def _is_terminal(stream: TextIO) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


def terminal_columns(stream: TextIO) -> int:
    """The width of ``stream``'s terminal; a terminal that reports 0 columns (a fresh pty, ``docker exec -t``) or
    none counts as ``COLUMNS``, else 80 columns (shutil's fallback)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0
    return columns if columns > 0 else shutil.get_terminal_size().columns or 80


class LiveLine:
    """One line of text that rich redraws in place on the terminal of ``stream``, cut to the terminal's width
    (its end goes first: a line that wraps cannot be redrawn in place and stacks up instead). ``render`` is called
    on every redraw, by rich's refresh thread too (so clocks tick between events); it is stripped of control
    characters, since folder names, episode ids and a model's tool-call names pass through it."""

    def __init__(self, stream: TextIO, render: Callable[[], str], refresh_per_second: float, transient: bool):
        self.stream = stream
        self.render = render
        # force_terminal: the caller saw a terminal (FORCE_COLOR or TTY_COMPATIBLE must not decide it); no colours
        # or highlighting: the line is plain text, as a log of it would be
        self.console = Console(file=stream, force_terminal=True, color_system=None, highlight=False,
                               legacy_windows=False, width=terminal_columns(stream))
        # stdout and stderr are not redirected through the live display: stdout's last line is the summary JSON
        self.live = Live(console=self.console, get_renderable=self._renderable, auto_refresh=True,
                         refresh_per_second=refresh_per_second, transient=transient, redirect_stdout=False,
                         redirect_stderr=False)
        self.stopped = False

    def _renderable(self) -> Text:
        columns = terminal_columns(self.stream)  # again on each redraw: the terminal may have been resized
        self.console.width = columns
        text = Text(terminal_line(self.render()), no_wrap=True)
        text.truncate(columns - 1, overflow="ellipsis")  # below the last column: no pending wrap to trip over
        return text

    def start(self) -> None:
        self.live.start(refresh=True)

    def refresh(self) -> None:
        """Draw now; the first draw starts the display, and none follows :meth:`stop`."""
        if self.live.is_started:
            self.live.refresh()
        elif not self.stopped:
            self.start()

    def print_above(self, text: str) -> None:
        """``text`` as a line of its own, the live line drawn again below it."""
        self.console.print(Text(terminal_line(text)), soft_wrap=True)

    def stop(self) -> None:
        """Drawn a last time and left on screen with a newline after it, or erased when ``transient``."""
        self.stopped = True
        self.live.stop()


class Progress:
    def __init__(self, tally: Tally, stream: TextIO | None = None, max_rounds: int = 0, width: int = 24):
        self.tally = tally
        self.stream = stream or sys.stderr
        self.max_rounds = max_rounds
        self.width = width
        self.tty = _is_terminal(self.stream)
        self.started = time.monotonic()
        self.fresh = 0  # episodes finished in this invocation (the ETA is based on these)
        self.resumed = bool(tally.records)
        self.label = ""  # what the line shows after its counts: the latest event
        self.finished = False  # after finish() nothing is drawn: what follows (notes, the summary) has the screen
        self.live = LiveLine(self.stream, lambda: self.line(self.label), refresh_per_second=2,
                             transient=False) if self.tty else None
        # held while drawing and by finish(): an episode thread's late report cannot draw after the line ended.
        # Never taken by the SIGINT handler (it may interrupt a holder of this lock: see BenchmarkRunner).
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

        return (f"[{bar}] {tally.finished}/{tally.total} elapsed {_clock(elapsed)} "
                f"ETA {_clock(eta) if eta is not None else '?'} task {shown(task)} strict {shown(strict)} "
                f"invalid {tally.count(INVALID)} errors {tally.count(ERROR)}" + (f" | {label}" if label else ""))

    def update(self, episode_id: str) -> None:
        """An episode's record joined the tally."""
        self.fresh += 1
        self._show(episode_id)

    def episode(self, task: EpisodeTask, outcome: EpisodeOutcome, action: str) -> None:
        """A running episode finished a model turn: on a terminal, show where it is."""
        if not self.tty:
            return
        usage = outcome.usage
        rounds = f"round {outcome.rounds}/{self.max_rounds}" if self.max_rounds else "answer turn"
        label = f"{task.episode_id} {rounds} {action[:40]}"
        if usage.calls or usage.input_tokens or usage.output_tokens:  # offline agents call no model
            label += f" tokens {_tokens(usage.input_tokens)} in/{_tokens(usage.output_tokens)} out"
        self._show(label)

    def note(self, text: str) -> None:
        """A message of its own line (interrupts, stop reasons, how to resume); while the run goes on, the
        progress line is drawn again below it."""
        with self._lock:
            if self.live is not None and not self.finished:
                self.live.print_above(text)
            else:
                self.stream.write(terminal_line(text) + "\n")
                self.stream.flush()

    def start(self) -> None:
        with self._lock:
            self.label = "resuming" if self.resumed else "starting"
            if self.live is not None:
                self.live.start()
            else:
                self._print_line()

    def finish(self) -> None:
        """The last progress line stays as it is; a late report of a running episode draws nothing."""
        with self._lock:
            if self.live is not None and not self.finished:
                self.live.stop()
            self.finished = True

    def _show(self, label: str) -> None:
        with self._lock:
            if self.finished:
                return
            self.label = label
            if self.live is not None:
                self.live.refresh()
            else:
                self._print_line()

    def _print_line(self) -> None:
        self.stream.write(terminal_line(self.line(self.label)) + "\n")
        self.stream.flush()


class Activity:
    """A long step that is not an episode (generating a cohort, writing a report's pages) shown on stderr: on a
    terminal one line that rich redraws with the count done and the seconds so far; there and elsewhere (logs) a
    line with its duration when it ends. Use as a context manager; :meth:`advance` counts items when ``total``
    is known."""

    def __init__(self, label: str, total: int | None = None, stream: TextIO | None = None, tick_s: float = 0.5):
        self.label, self.total, self.done = label, total, 0
        self._lock = threading.Lock()  # note() from several threads: one line at a time
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.live = LiveLine(self.stream, self.text, refresh_per_second=1 / tick_s,
                             transient=True) if _is_terminal(self.stream) else None

    def text(self) -> str:
        count = f" {self.done}/{self.total}" if self.total is not None else ""
        return f"{self.label}{count} ({time.monotonic() - self.started:.0f} s)"

    def advance(self, count: int = 1) -> None:
        self.done += count  # from the thread that does the step; rich's refresh thread only reads it

    def note(self, text: str) -> None:
        """A line of its own while the step goes on (on a terminal above the redrawn one); from any thread."""
        with self._lock:
            if self.live is not None:
                self.live.print_above(text)
            else:
                self.stream.write(terminal_line(text) + "\n")
                self.stream.flush()

    def __enter__(self) -> Activity:
        self.started = time.monotonic()
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, kind, error, traceback) -> None:
        """A finished step leaves one line; a failed one leaves none (its error is the line that matters)."""
        if self.live is not None:
            self.live.stop()  # erased: the line below replaces it
        if kind is None:
            self.stream.write(f"{self.text()}: done\n")
        self.stream.flush()

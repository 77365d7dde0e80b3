"""``bench run`` on a real pseudo-terminal (pty), as a person sees it: Ctrl-C in the middle of a run, on a terminal
that reports 0 columns (a fresh pty, ``docker exec -t``). Nothing is drawn after the progress finishes (the notes
and the summary were once glued to a redrawn bar), progress lines fall back to 80 columns instead of ``[…``, and the
run ends with a short table and the next command instead of the summary JSON, which stays the last stdout line
off a terminal and with ``--json``."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from agents_cases import write_ucsf_package

from MedOpenClawLib.bench.outcomes import Tally
from MedOpenClawLib.bench.progress import Progress, terminal_columns
from MedOpenClawLib.bench.run_summary import print_summary, summary_table

REPO = Path(__file__).resolve().parents[3]
CONSOLE_SCRIPT = Path(sys.executable).with_name("medopenclaw")
CLEAR = "\r\x1b[2K"
SHOW_CURSOR = "\x1b[?25h"


def on_terminal(argv: list[str], cwd: Path, columns: int, interrupt_on: str | None = None) -> tuple[int, str]:
    """Run the console script with stdin, stdout and stderr on a new pty of ``columns`` columns; Ctrl-C (SIGINT to
    its process group, as a terminal sends it) once ``interrupt_on`` appears. Exit status and everything shown."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "MedOpenClaw"), str(REPO / "MedCopilot")])
    process = subprocess.Popen([str(CONSOLE_SCRIPT), *argv], cwd=cwd, env=env, stdin=slave, stdout=slave,
                               stderr=slave, start_new_session=True)
    os.close(slave)
    shown, interrupted, deadline = b"", False, time.monotonic() + 600
    while time.monotonic() < deadline:
        if interrupt_on and not interrupted and interrupt_on.encode() in shown:
            os.killpg(process.pid, signal.SIGINT)
            interrupted = True
        ready, _, _ = select.select([master], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer of the pty has closed it
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    return process.wait(timeout=60), shown.decode("utf-8", "replace").replace("\r\n", "\n")


def test_ctrl_c_on_a_zero_column_terminal_leaves_clean_lines_and_a_table(tmp_path):
    write_ucsf_package(tmp_path / "cases", cases=3)
    status, shown = on_terminal(["bench", "run", "--module", "ucsf-pdgm", "--agent", "oracle", "--cases", "cases",
                                 "--out", "runs/x"], tmp_path, columns=0, interrupt_on="1/3 elapsed")
    # Ctrl-C once an episode is scored: on "0/3 elapsed" it could land before the first episode started (n = 0)
    assert status == 130, shown
    lines = [line.rsplit(CLEAR, 1)[-1] for line in shown.split("\n")]  # what stays on screen of each line
    finished = next(index for index, line in enumerate(lines) if line.startswith("[") and "/3 elapsed" in line
                    and not lines[index + 1].startswith("["))
    drawn = [part for line in shown.split("\n") for part in line.split(CLEAR) if part.startswith("[")]
    assert drawn and all(len(part) <= 80 and "/3 elapsed" in part for part in drawn)  # not "[…"
    after = lines[finished + 1:]
    assert not any("elapsed" in line or CLEAR in line for line in after), after  # nothing drawn after finish
    assert any(line.startswith("interrupted: finishing") for line in lines[:finished + 1])
    assert any("not run: to resume, run medopenclaw bench run" in line for line in after)
    table = [line for line in after if line.startswith(("module ", "ucsf-pdgm "))]
    assert re.match(r"module +n +Task +Strict +Loc +errors +not run$", table[0])
    assert re.match(r"ucsf-pdgm +[12] +1\.000 +1\.000 +1\.000 +0 +[12]$", table[1]), table
    assert after[-2].startswith("next: medopenclaw bench report runs/x ") and after[-1] == ""
    assert not any(line.lstrip().startswith("{") for line in after)  # no JSON blob wrapped over the screen


def test_the_summary_json_is_the_last_line_off_a_terminal_or_with_json():
    summary = {"module": "ucsf-pdgm", "n": 2, "task": 0.5, "strict": None, "loc": 1.0, "errors": 1, "missing": 0}
    for as_json in (True, False):
        stream = io.StringIO()
        print_summary(summary, Path("runs/x").resolve(), stream, as_json)
        last = stream.getvalue().splitlines()[-1]
        if as_json:
            assert json.loads(last) == summary
        else:
            assert last.startswith("next: medopenclaw bench report runs/x ")
    assert summary_table(summary).splitlines()[1].split() == ["ucsf-pdgm", "2", "0.500", "-", "1.000", "1", "0"]
    several = {"modules": {"a": {"n": 1, "task": 1.0, "strict": 1.0, "loc": None, "errors": 0},
                           "b": {"n": 2, "task": 0.0, "strict": 0.0, "loc": None, "errors": 2}},
               "task_macro": 0.5, "strict_macro": 0.5, "loc_macro": None, "errors": 2, "missing": 1}
    assert summary_table(several).splitlines()[-1].split() == ["all", "(macro)", "3", "0.500", "0.500", "-", "2",
                                                               "1"]


def test_nothing_is_drawn_after_finish_and_zero_columns_count_as_80(monkeypatch):
    class ZeroColumns(io.StringIO):
        def isatty(self):
            return True

        def fileno(self):  # a pty that reports 0 columns
            return zero_slave

    monkeypatch.delenv("COLUMNS", raising=False)
    master, zero_slave = pty.openpty()
    try:
        stream = ZeroColumns()
        assert terminal_columns(stream) == 80
        progress = Progress(Tally(2), stream)
        progress.start()
        progress.finish()
        drawn = stream.getvalue()
        progress.update("late")  # a running episode's report arriving after the run ended
        progress.note("2 episodes not run: to resume, run the same command again")
        assert stream.getvalue() == drawn + "2 episodes not run: to resume, run the same command again\n"
        assert drawn.endswith("\n" + SHOW_CURSOR)  # the line ends; the cursor hidden while it was drawn is back
        assert len(drawn.rsplit(CLEAR, 1)[-1].removesuffix("\n" + SHOW_CURSOR)) <= 80
    finally:
        os.close(master)
        os.close(zero_slave)


LANDS_WHILE_DRAWING = """
import io, os, signal, sys, threading
from MedOpenClawLib.cli import main

class Terminal(io.StringIO):
    pressed = False

    def isatty(self):
        return True

    def write(self, text):  # one Ctrl-C while the main thread draws '1/3' (the progress line's locks are held)
        if "1/3 elapsed" in text and not self.pressed and threading.current_thread() is threading.main_thread():
            self.pressed = True
            os.kill(os.getpid(), signal.SIGINT)
        return super().write(text)

sys.stderr = terminal = Terminal()
status = main(sys.argv[1:])
sys.__stderr__.write(terminal.getvalue())
sys.exit(status)
"""


def test_ctrl_c_while_the_progress_line_is_drawn_does_not_hang(tmp_path):
    """The handler once took the progress line's lock, which the interrupted main thread may hold: a deadlock."""
    write_ucsf_package(tmp_path / "cases", cases=3)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "MedOpenClaw"), str(REPO / "MedCopilot")])}
    done = subprocess.run([sys.executable, "-c", LANDS_WHILE_DRAWING, "bench", "run", "--module", "ucsf-pdgm",
                           "--agent", "oracle", "--cases", "cases", "--out", "runs/x", "--workers", "1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 130, done.stderr
    assert "interrupted: finishing" in done.stderr and "not run: to resume" in done.stderr
    assert json.loads((tmp_path / "runs/x/summary.json").read_text())["interrupted"]

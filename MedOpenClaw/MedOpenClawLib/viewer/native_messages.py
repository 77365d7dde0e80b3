"""Warnings are data: what VTK/Slicer (the VTK output window) and ITK (``std::cerr``) print while a file is read
is captured and returned to the caller, who puts it in the action's ``data.warnings`` (and so in the audit
record) instead of leaving it on the process's stderr where no agent, user or trace ever sees it.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

# VTK's own modules, not ``import vtk`` (all of VTK: see viewer/geometry.py)
from vtkmodules.vtkCommonCore import vtkOutputWindow, vtkStringOutputWindow

MAX_MESSAGES = 8
MAX_MESSAGE_CHARS = 300
# VTK pipeline chatter that repeats the real message of another block
_NOISE = ("returned failure for request", "Failed to read node", "Number of files listed in the node is 0",
          "This is not a nrrd file", "Details: FileFormatError")
_VTK_HEADER = re.compile(r"^(?:ERROR|Warning|WARNING|Generic Warning): In .*?, line \d+\s*", re.MULTILINE)
_OBJECT_PREFIX = re.compile(r"^\w+ \(0x[0-9a-fA-F]+\): ")
# vtkLogger's copy of the same message on stderr: "2026-01-01 10:00:00.000 (   1.2s) [  7F..]  file.cxx:12  ERR| "
_LOGGER_PREFIX = re.compile(r"^\S+ \S+ \(\s*[\d.]+s\) \[[^\]]*\]\s*\S+:\d+\s+\w+\|\s*", re.MULTILINE)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][^\s'\"/\\]+)+[/\\]([^\s'\"/\\]+)")  # absolute path -> its file name


def clean_messages(text: str) -> list[str]:
    """Distinct, readable messages from raw VTK/ITK output (file/line headers and object addresses removed)."""
    messages: list[str] = []
    for block in re.split(r"\n\s*\n", _LOGGER_PREFIX.sub("\n", _ANSI.sub("", text))):
        block = _VTK_HEADER.sub("", block.strip())
        if not block or any(noise in block for noise in _NOISE):
            continue
        first = _OBJECT_PREFIX.sub("", " ".join(line.strip() for line in block.splitlines() if line.strip()))
        first = _PATH.sub(r"\1", first)[:MAX_MESSAGE_CHARS]
        if first not in messages:
            messages.append(first)
    return messages[:MAX_MESSAGES]


@contextmanager
def captured_native_messages() -> Iterator[list[str]]:
    """Collect VTK output-window and native stderr text during the block; the yielded list is filled with
    :func:`clean_messages` of it when the block ends (also when it raises)."""
    messages: list[str] = []
    window = vtkStringOutputWindow()
    previous_window = vtkOutputWindow.GetInstance()
    sys.stderr.flush()
    saved_fd = os.dup(2)
    capture = tempfile.TemporaryFile()
    os.dup2(capture.fileno(), 2)
    vtkOutputWindow.SetInstance(window)
    try:
        yield messages
    finally:
        vtkOutputWindow.SetInstance(previous_window)
        sys.stderr.flush()
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        capture.seek(0)
        native = capture.read().decode("utf-8", errors="replace")
        capture.close()
        messages.extend(clean_messages(window.GetOutput() + "\n\n" + native))

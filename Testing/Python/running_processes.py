"""Which processes are running, read from Linux /proc: the tests that prove a viewer process did not outlive its
session or server (standard library only, so a test file imports it without the viewer's packages)."""

from __future__ import annotations

from pathlib import Path


def running_with(text: str) -> list[int]:
    """Processes whose command line holds ``text`` (Linux /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found

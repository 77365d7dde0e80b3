"""A viewer worker whose markups sink crashes natively on a sentinel label: the test double of the
VTK crashes (a label reaching a markups API segfaulted or aborted the process).

The wrapped ``add_markups`` first adds the markups node to the scene, as the real sink does, and only then
dies, so a crash leaves a half-changed scene behind -- which the restored session must not show; the whole-slide
viewer's ``record_view`` dies the same way. Labels ``CRASH:segv`` (a real SIGSEGV: reading address 0 through
ctypes), ``CRASH:abort`` (``os.abort``, SIGABRT) and ``CRASH:hang`` (never returns). Only tests launch this
file; the production worker has no such path.

Run as ``python crashing_worker.py --port P --ready-file F --parent-pid R`` (the worker's own arguments), or
import :func:`command` as a supervisor's launch command.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

SENTINEL = "CRASH:"


def crash(kind: str) -> None:
    if kind == "segv":
        ctypes.string_at(0)  # dereferences NULL: SIGSEGV in native code
    elif kind == "abort":
        os.abort()
    elif kind == "hang":
        while True:
            time.sleep(60)


def crashing(function):
    """``function``, run for real, then a crash when its ``label`` argument carries the sentinel."""
    import functools
    import inspect

    signature = inspect.signature(function)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        outcome = function(*args, **kwargs)
        label = signature.bind(*args, **kwargs).arguments.get("label")
        if isinstance(label, str) and label.startswith(SENTINEL):
            crash(label.removeprefix(SENTINEL))
        return outcome

    return wrapper


def install() -> None:
    from MedOpenClawLib.evidence import actions
    from MedOpenClawLib.pathology.viewer import HeadlessWsiViewer

    actions.add_markups = crashing(actions.add_markups)
    HeadlessWsiViewer.record_view = crashing(HeadlessWsiViewer.record_view)


def command(ready_file: str) -> list[str]:
    """Launch command for :class:`~MedOpenClawLib.server.supervisor.SupervisedRegistry` (``command=``)."""
    from MedOpenClawLib.worker.client import worker_arguments

    return [sys.executable, os.path.abspath(__file__), *worker_arguments(ready_file, 0)]


if __name__ == "__main__":
    from MedOpenClawLib.worker.service import main

    install()
    sys.exit(main())

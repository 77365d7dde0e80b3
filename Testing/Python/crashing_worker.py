"""A viewer worker whose markups sink crashes natively on a sentinel label: the test double of the
VTK crashes (a label reaching a markups API segfaulted or aborted the process).

The wrapped ``add_markups`` first adds the markups node to the scene, as the real sink does, and only then
dies, so a crash leaves a half-changed scene behind -- which the restored session must not show; the whole-slide
viewer's ``record_view`` dies the same way. Labels ``CRASH:segv`` (a real SIGSEGV: reading address 0 through
ctypes), ``CRASH:abort`` (``os.abort``, SIGABRT) and ``CRASH:hang`` (never returns); and answers that break the
worker protocol (:func:`garbling`). Only tests launch this file; the production worker has no such path.

Run as ``python crashing_worker.py --port P --ready-file F --parent-pid R`` (the worker's own arguments), or
import :func:`command` as a supervisor's launch command.
"""

from __future__ import annotations

import ctypes
import functools
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


def garbling(write):
    """The worker's message writer, breaking the protocol when the answered call's label says so (the call itself
    ran): ``CRASH:garble`` sends a line that is not JSON and keeps serving, ``CRASH:truncate`` declares an
    attachment, sends part of it and exits, ``CRASH:badpng`` attaches bytes that are not a PNG to an image."""
    import json

    def wrapper(stream, message, attachments=()):
        result = message.get("result")
        record = result.get("record") if isinstance(result, dict) else None
        label = ((record or {}).get("arguments") or {}).get("label")
        if label == SENTINEL + "garble":
            stream.write(b'{"id": 1, "ok": tru\n')
            stream.flush()
            return None
        if label == SENTINEL + "truncate":
            stream.write(json.dumps({**message, "attachments": [4096]}).encode() + b"\n\x89PNG")
            stream.flush()
            os._exit(3)
        if label == SENTINEL + "badpng":
            result["result"]["images"] = [{"view": "axial", "width": 1, "height": 1, "png_attachment": 0}]
            return write(stream, message, [b"GIF89a"])
        return write(stream, message, attachments)

    return wrapper


def install() -> None:
    """Arm the crashes. The markups sink is wrapped when a radiology viewer is built: importing it loads Slicer,
    which a whole-slide worker never does (about 2 s of CPU per pathology worker)."""
    from MedOpenClawLib.pathology.viewer import HeadlessWsiViewer
    from MedOpenClawLib.worker import service

    build_radiology = service.BUILDERS["radiology"]

    @functools.cache  # once per worker, however many episodes it starts
    def arm_markups() -> None:
        from MedOpenClawLib.evidence import actions

        actions.add_markups = crashing(actions.add_markups)

    def crashing_radiology(*args, **kwargs):
        arm_markups()
        return build_radiology(*args, **kwargs)

    service.BUILDERS["radiology"] = crashing_radiology
    HeadlessWsiViewer.record_view = crashing(HeadlessWsiViewer.record_view)
    service.write_message = garbling(service.write_message)


def command(ready_file: str) -> list[str]:
    """Launch command for :class:`~MedOpenClawLib.server.supervisor.SupervisedRegistry` (``command=``)."""
    from MedOpenClawLib.worker.client import worker_arguments

    return [sys.executable, os.path.abspath(__file__), *worker_arguments(ready_file, 0)]


if __name__ == "__main__":
    from MedOpenClawLib.worker.service import end_process, main

    install()
    end_process(main())

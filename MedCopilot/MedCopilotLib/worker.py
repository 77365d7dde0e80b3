"""Run model calls in a worker process and hand their outcome back to the GUI thread.

Inside 3D Slicer a Python thread barely runs while the GUI idles: the main thread holds the GIL whenever Qt's event
loop waits, because PythonQt releases it only around slot calls, and only with thread support switched on
(commontk/PythonQt src/PythonQtMethodInfo.cpp ``PythonQtSlotInfo::invokeQtMethod``; ``_globalShouldAllowThreads``
is false unless ``PythonQt::setEnableThreadSupport(true)``, src/PythonQt.cpp, which neither Slicer nor CTK calls).
A thread's model call would advance only at the panel's QTimer ticks. So the call runs in a child Python process,
which no GIL of this process slows (inside Slicer ``sys.executable`` is PythonSlicer:
Base/QTCore/qSlicerCoreApplication.cxx). :meth:`ModelWorker.poll`, called by the panel's ``QTimer`` on the main
thread, reads the child's answer pipe without blocking and delivers the outcome to the callback there, so callbacks
may touch the scene and the widgets.

One child serves a session's calls in turn and keeps each model object it was sent (a provider's compaction state
lives on in it); it ends when its standard input closes (the session stopped, or this process died). A cancelled
call ends its child, whose answer would come too late; the next call starts a fresh one. :meth:`ModelWorker.prepare`
starts the child and hands it the model before the first call: unpickling a provider imports its vendor's SDK
(seconds of CPU for some), which then happens while the clinician types rather than while they wait for an answer.
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

HEADER = struct.Struct(">Q")  # each message: its pickled length, then the pickle
READ_CHUNK = 1 << 20
# PythonSlicer.exe is a console program: on Windows the child would otherwise open a console window of its own
NO_CONSOLE = {"creationflags": subprocess.CREATE_NO_WINDOW} if os.name == "nt" else {}


# what handing a request to the child can raise: its pipe broke, or the model does not pickle
HANDOVER_ERRORS = (OSError, pickle.PicklingError, TypeError, AttributeError)


class WorkerBusy(RuntimeError):
    pass


@dataclass
class ModelCall:
    """``model.complete(messages, tools)``, as data a child process can receive: the model must pickle (the
    providers do: their configuration and their conversation state; each process opens its own connections)."""

    model: Any
    messages: list
    tools: list


def write_message(stream: BinaryIO, value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()


def read_message(stream: BinaryIO) -> Any:
    """The next message, or None when the stream ended."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    return pickle.loads(stream.read(size))


def child_environment() -> dict[str, str]:
    """This process's environment with its ``sys.path`` as the child's ``PYTHONPATH``: whatever the parent can
    import (MedOpenClawLib, MedCopilotLib, a module's folder) the child can unpickle."""
    paths = list(dict.fromkeys(path for path in sys.path if path and os.path.isdir(path)))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


class ModelWorker:
    """One model call at a time (a copilot waits for each model reply before anything else can happen)."""

    def __init__(self, python: str | None = None):
        self.python = python or sys.executable
        self._process: subprocess.Popen | None = None
        self._models: dict[int, Any] = {}  # what the running child holds, by key (kept: an id is never reused)
        self._buffer = b""
        self._failed: BaseException | None = None
        self._callbacks: tuple[Callable[[Any], None], Callable[[BaseException], None]] | None = None

    @property
    def busy(self) -> bool:
        return self._callbacks is not None

    def _start(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen([self.python, "-m", "MedCopilotLib.worker"], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, env=child_environment(), **NO_CONSOLE)
            os.set_blocking(self._process.stdout.fileno(), False)  # Windows pipes too, from Python 3.12 on
            self._models, self._buffer = {}, b""
        return self._process

    def prepare(self, model: Any) -> None:
        """Have a child hold ``model`` ahead of its first call (nothing is answered); a no-op while a call runs or
        when the child holds it already. A model that cannot be handed over is left for the call to report."""
        if self.busy:
            return
        try:
            self._send(model, None, None)
        except HANDOVER_ERRORS:
            self.close()

    def submit(self, call: ModelCall, on_done: Callable[[Any], None],
               on_error: Callable[[BaseException], None]) -> None:
        if self.busy:
            raise WorkerBusy("a model call is already running")
        self._callbacks = (on_done, on_error)
        try:
            self._send(call.model, call.messages, call.tools)
        except HANDOVER_ERRORS as error:
            # delivered by the next poll like any failed call; a broken child is replaced by the next call
            self._failed = RuntimeError(f"the model call could not be handed to its process: "
                                        f"{type(error).__name__}: {error}")
            self.close()

    def _send(self, model: Any, messages: list | None, tools: list | None) -> None:
        """One request to the (started) child, carrying ``model`` only if the child does not hold it yet; a request
        without messages (:meth:`prepare`) is not sent at all then. Raises what handing over raises."""
        process = self._start()
        key = id(model)
        held = self._models.get(key) is model
        if messages is not None or not held:
            write_message(process.stdin, (key, None if held else model, messages, tools))
        self._models[key] = model

    def cancel(self) -> None:
        """Forget the running call: its child is ended (the next call starts another)."""
        if self.busy:
            self._callbacks, self._failed = None, None
            self.close()

    def poll(self) -> bool:
        """Deliver a finished call's outcome on the calling (main) thread; True if a callback ran."""
        if not self.busy:
            return False
        failed, self._failed = self._failed, None
        outcome = ("error", failed) if failed is not None else self._read_outcome()
        if outcome is None:
            return False
        on_done, on_error = self._callbacks
        self._callbacks = None
        kind, value = outcome
        (on_done if kind == "done" else on_error)(value)
        return True

    def _read_outcome(self) -> tuple[str, Any] | None:
        """The child's answer once it is whole; an ended child is an error outcome."""
        ended = False
        while True:
            try:
                chunk = os.read(self._process.stdout.fileno(), READ_CHUNK)
            except BlockingIOError:
                break
            if not chunk:
                ended = True
                break
            self._buffer += chunk
        if len(self._buffer) >= HEADER.size:
            (size,) = HEADER.unpack(self._buffer[:HEADER.size])
            if len(self._buffer) >= HEADER.size + size:
                data, self._buffer = self._buffer[HEADER.size:HEADER.size + size], self._buffer[HEADER.size + size:]
                return pickle.loads(data)
        if ended:
            code = self._process.wait()
            self.close()
            return "error", RuntimeError(f"the model process ended unexpectedly (exit code {code})")
        return None

    def wait(self, timeout_s: float) -> bool:
        """Block until the running call's outcome can be delivered (tests and scripted sessions, never the GUI)."""
        deadline = time.monotonic() + timeout_s
        while self.busy and time.monotonic() < deadline:
            if self.poll():
                return True
            time.sleep(0.005)
        return not self.busy

    def close(self) -> None:
        """End the child (closing its input ends it; a child stuck in a call is killed)."""
        process, self._process = self._process, None
        if process is None:
            return
        process.stdin.close()
        try:
            process.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()


def serve(requests: BinaryIO, answers: BinaryIO) -> None:
    """The child: one call at a time until its input ends; every outcome goes back, an error as its exception (a
    request without messages only hands over a model: it has no outcome)."""
    models: dict[int, Any] = {}
    while (request := read_message(requests)) is not None:
        key, model, messages, tools = request
        if model is not None:
            models[key] = model
        if messages is None:
            continue
        try:
            outcome = ("done", models[key].complete(messages, tools))
        except Exception as error:  # delivered to on_error in the parent
            outcome = ("error", error)
        try:
            write_message(answers, outcome)
        except (pickle.PicklingError, TypeError, AttributeError):  # an exception that does not pickle
            write_message(answers, ("error", RuntimeError(f"{type(outcome[1]).__name__}: {outcome[1]}")))


if __name__ == "__main__":
    requests_in, answers_out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the answers
    serve(requests_in, answers_out)

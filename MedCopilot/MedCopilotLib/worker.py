"""Run slow calls (model requests) off the GUI thread and hand their outcome back to it.

The job runs on a daemon thread and puts its outcome on a queue; :meth:`BackgroundWorker.poll`, called by a
``QTimer`` on the main thread (the pattern of Slicer's MONAI Auto3DSeg extension), delivers it to the
callback there, so callbacks may touch the scene and the widgets. A cancelled job's outcome is dropped.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class _Outcome:
    job_id: int
    value: Any = None
    error: BaseException | None = None


class WorkerBusy(RuntimeError):
    pass


class BackgroundWorker:
    """One job at a time (a copilot waits for each model reply before anything else can happen)."""

    def __init__(self):
        self._outcomes: queue.Queue[_Outcome] = queue.Queue()
        self._job_id = 0
        self._callbacks: tuple[Callable[[Any], None], Callable[[BaseException], None]] | None = None
        self._thread: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        return self._callbacks is not None

    def submit(
        self,
        job: Callable[[], Any],
        on_done: Callable[[Any], None],
        on_error: Callable[[BaseException], None],
    ) -> int:
        if self.busy:
            raise WorkerBusy("a model call is already running")
        self._job_id += 1
        job_id = self._job_id
        self._callbacks = (on_done, on_error)

        def run() -> None:
            try:
                self._outcomes.put(_Outcome(job_id, value=job()))
            except BaseException as error:  # delivered to on_error on the main thread
                self._outcomes.put(_Outcome(job_id, error=error))

        self._thread = threading.Thread(target=run, name=f"medcopilot-job-{job_id}", daemon=True)
        self._thread.start()
        return job_id

    def cancel(self) -> None:
        """Forget the running job: its thread finishes in the background and its outcome is discarded."""
        self._callbacks = None
        self._job_id += 1

    def poll(self) -> bool:
        """Deliver a finished job's outcome on the calling (main) thread; True if a callback ran."""
        delivered = False
        while True:
            try:
                outcome = self._outcomes.get_nowait()
            except queue.Empty:
                return delivered
            if outcome.job_id != self._job_id or self._callbacks is None:
                continue
            on_done, on_error = self._callbacks
            self._callbacks = None
            if outcome.error is None:
                on_done(outcome.value)
            else:
                on_error(outcome.error)
            delivered = True

    def wait(self, timeout_s: float) -> bool:
        """Block until the running job's thread ends (tests and scripted sessions only, never the GUI)."""
        if self._thread is not None:
            self._thread.join(timeout_s)
            return not self._thread.is_alive()
        return True

"""Real headless workers kept warm across the in-process runs of one test process.

A run keeps its worker warm across its episodes (each start costs ~2.5 s of CPU, almost all of it importing
slicer-core); a pool carries that across runs whose subject is not the worker's start: a run closing its slot
hands the worker back here, and the next run takes it and starts its episode as the next episode of a run would.
A killed worker stays killed (a run that kills one still sees it replaced by a fresh start), and a worker is only
shared by runs with the same launch settings (Slicer, start-up and call timeouts)."""

from __future__ import annotations

import threading
from pathlib import Path

from MedOpenClawLib.bench.executors import worker_slicer
from MedOpenClawLib.bench.tasks import RunConfig
from MedOpenClawLib.worker.client import WorkerProcess


class WarmWorker(WorkerProcess):
    """A worker whose ``close`` hands it back to its pool instead of ending it; ``kill`` still ends it."""

    def __init__(self, pool: WarmPool, directory: Path, settings: tuple):
        super().__init__(directory, *settings)
        self.pool, self.settings = pool, settings

    def close(self) -> None:
        self.pool.give_back(self)

    def shut_down(self) -> None:
        super().close()


class WarmPool:
    """Idle warm workers by launch settings; a worker is handed to one run slot at a time."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.idle: dict[tuple, list[WarmWorker]] = {}
        self.started = 0
        self._lock = threading.Lock()  # the slots of a run with several workers launch from their own threads

    def local_worker(self, config: RunConfig, directory: Path) -> WorkerProcess:
        """:func:`MedOpenClawLib.bench.executors.local_worker` served from the pool: an idle live worker with the
        run's launch settings, else a freshly started one (``directory``, the run's slot folder, is unused: a warm
        worker keeps logging where it was started)."""
        settings = (worker_slicer(config), config.startup_timeout_s, config.call_timeout_s)
        while (worker := self._take(settings)) is not None:
            if worker.alive():
                return worker
            worker.kill()
        with self._lock:
            self.started += 1
            name = f"w{self.started}"
        return WarmWorker(self, self.directory / name, settings).start()

    def _take(self, settings: tuple) -> WarmWorker | None:
        with self._lock:
            idle = self.idle.get(settings)
            return idle.pop() if idle else None

    def give_back(self, worker: WarmWorker) -> None:
        with self._lock:
            self.idle.setdefault(worker.settings, []).append(worker)  # a dead one is dropped when next asked for

    def shut_down(self) -> None:
        with self._lock:
            idle, self.idle = self.idle, {}
        for workers in idle.values():
            for worker in workers:
                worker.shut_down()

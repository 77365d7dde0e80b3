"""The worker processes that write the synthetic cohort's cases, and what happens when one of them dies.

A cohort takes minutes of CPU and its first use is unattended (``bench run``, the test suite's fixture), so a
worker killed from outside (the out-of-memory killer, a stray signal) must not throw the whole generation away:
every case is seeded on its own and written whole, so the cases a dead worker left unfinished are simply written
again in a fresh pool, byte for byte what they would have been. How the worker ended is said on stderr each time,
and a pool that keeps dying ends the generation with that account instead of looping.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

MAX_RESTARTS = 2  # fresh pools after a worker died, per pool's lifetime: a third death is no accident


class WorkersDied(RuntimeError):
    """Worker processes kept dying: the cases could not be written."""


class RestartingPool:
    """``workers`` processes shared by every thread that runs jobs on it; a dead worker gets the pool restarted
    (at most :data:`MAX_RESTARTS` times) and every unfinished job resubmitted by the thread that submitted it."""

    def __init__(self, workers: int):
        self.workers = workers
        self.restarts = 0
        self._lock = threading.Lock()
        self._failure: str | None = None
        self._pool = _process_pool(workers)

    def run(self, function: Callable, jobs: list[tuple]) -> list:
        """``function(*job)`` for every job, in job order; an exception a job raised propagates as it is."""
        results: list = [None] * len(jobs)
        pending = list(range(len(jobs)))
        while pending:
            pool = self._current()
            futures, broken = {}, []
            for index in pending:
                try:
                    futures[index] = pool.submit(function, *jobs[index])
                except BrokenProcessPool:  # another thread's job killed it meanwhile
                    broken.append(index)
            for index, future in futures.items():
                try:
                    results[index] = future.result()
                except BrokenProcessPool:
                    broken.append(index)
            if broken:
                self._restart(pool, len(broken))
            pending = sorted(broken)
        return results

    def close(self) -> None:
        with self._lock:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def _current(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._failure:
                raise WorkersDied(self._failure)
            return self._pool

    def _restart(self, broken: ProcessPoolExecutor, unfinished: int) -> None:
        """Replace ``broken`` unless another thread already did; say how its workers ended."""
        with self._lock:
            if self._failure:
                raise WorkersDied(self._failure)
            if self._pool is not broken:
                return
            account = _how_workers_ended(broken)
            if self.restarts >= MAX_RESTARTS:
                self._failure = (f"cohort generation: a worker process died again, after {self.restarts} fresh "
                                 f"pools: {account}. The cases were not written")
                raise WorkersDied(self._failure)
            self.restarts += 1
            print(f"cohort generation: a worker process died: {account}. Its unfinished cases are written again "
                  f"in a fresh pool ({self.restarts} of at most {MAX_RESTARTS})", file=sys.stderr, flush=True)
            self._pool = _process_pool(self.workers)


def _how_workers_ended(pool: ProcessPoolExecutor) -> str:
    """The exit status of the pool's dead workers (the executor keeps its processes in a private attribute,
    present from Python 3.8 to 3.13; without it the account says so). The executor terminates the surviving
    workers itself once one died: those SIGTERMs are not the cause and are left out."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=True)  # its manager has joined every worker: their exit codes are final
    causes = sorted({_exit_status(process.exitcode) for process in processes
                     if process.exitcode not in (0, None, -signal.SIGTERM)})
    return ", ".join(causes) or "its exit status is unknown"


def _exit_status(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:  # a real-time or platform signal without a name
            name = f"signal {-code}"
        hint = ", on Linux often the out-of-memory killer (see dmesg)" if -code == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    return f"exit code {code}"


_SHARED_POOL: RestartingPool | None = None  # the pool of :func:`shared_pool` while it is open


@contextmanager
def shared_pool(workers: int) -> Iterator[None]:
    """One pool of ``workers`` processes for every :func:`run_jobs` inside the block, from any thread: several
    modules generated at once share it, so the cores stay busy through each module's last cases and its serial
    steps, and the workers start once instead of once per module."""
    global _SHARED_POOL
    pool = RestartingPool(workers)
    _SHARED_POOL = pool
    try:
        yield
    finally:
        _SHARED_POOL = None
        pool.close()


def run_jobs(function: Callable, jobs: list[tuple], workers: int) -> list:
    """``function(*job)`` for every job, in worker processes when ``workers`` > 1 or a :func:`shared_pool` is
    open (one case per job: cases are independent and seeded per case, so the output does not depend on the
    number of workers, on what else the pool runs, or on a worker that died and had its cases written again)."""
    if _SHARED_POOL is not None:
        return _SHARED_POOL.run(function, jobs)
    if workers <= 1 or len(jobs) <= 1:
        return [function(*job) for job in jobs]
    pool = RestartingPool(min(workers, len(jobs)))
    try:
        return pool.run(function, jobs)
    finally:
        pool.close()


def _process_pool(workers: int) -> ProcessPoolExecutor:
    # spawn: a worker forked from a process with threads (a run's progress line, shared_pool's callers) could
    # inherit a lock held by another thread
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_reuse_freed_memory)


def _reuse_freed_memory() -> None:
    """A generator worker keeps the memory it frees for its next arrays (glibc; elsewhere nothing changes): by
    default glibc maps large arrays anew (over its threshold, which grows to at most 32 MB) and trims freed memory
    at the heap's top, so a slide's blocks (13 MB float32 RGB each, strips of 50 MB) faulted their pages in again
    and again (a demo slide: 311k page faults and 1.9 s of system time; 59k and 0.2 s with these settings)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process runs on
    except (OSError, AttributeError, TypeError):  # no mallopt (macOS), no dlopen(NULL) (Windows)
        return
    mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD: arrays under 64 MB come from the heap, reused once freed
    mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD: up to 256 MB freed at the heap's top stays for the next arrays

"""Jobs for the tests of the cohort's worker pool (bench/synthetic/test_generation_pool.py). A spawned worker
imports the module of the function it runs: this one needs only os and signal, where the test module would have
every worker import pytest and the generators first."""

from __future__ import annotations

import os
import signal


def die_once(marker: str, how: str, function, *job):
    """Ends its worker process the first time it runs anywhere (the marker file is created exclusively), as the
    out-of-memory killer or a crash would; otherwise ``function(*job)``."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return function(*job)
    if how == "exit":
        os._exit(7)
    os.kill(os.getpid(), signal.SIGKILL)


def always_die(number: int) -> int:
    os.kill(os.getpid(), signal.SIGKILL)


def double(number: int) -> int:
    return 2 * number


def refuse(number: int) -> int:
    if number == 3:
        raise ValueError("case 3 is malformed")
    return number

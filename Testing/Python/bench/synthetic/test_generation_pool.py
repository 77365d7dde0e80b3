"""The cohort's worker pool when a worker dies: a killed worker's cases are written again, byte for byte, how it
died is said, and a pool that keeps dying ends the generation with that account instead of looping."""

from __future__ import annotations

import functools
import hashlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from small_cohort import SMALL
from worker_jobs import always_die, die_once, double, refuse

from MedOpenClawLib.bench.modules.camelyon17 import synthetic as camelyon_synthetic
from MedOpenClawLib.bench.synthetic import pool
from MedOpenClawLib.bench.synthetic.cohort import write_cohort


def _digest(root: Path) -> dict[str, str]:
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file()}


def test_a_killed_worker_has_its_cases_written_again_byte_for_byte(cohort, tmp_path, monkeypatch, capsys):
    """Also camelyon17's check that its cases written in worker processes are the serial ones
    (test_bench_cohort.AGAIN_IN_A_POOL)."""
    marker = str(tmp_path / "killed")

    def run_jobs_killing_one(function, jobs, workers):
        return pool.run_jobs(functools.partial(die_once, marker, "kill", function), jobs, workers)

    monkeypatch.setattr(camelyon_synthetic, "run_jobs", run_jobs_killing_one)
    write_cohort(tmp_path / "again", replace(SMALL, workers=2), modules=["camelyon17"])
    assert Path(marker).exists()
    serial = {name: digest for name, digest in _digest(cohort).items() if name.startswith("CAMELYON17/")}
    assert _digest(tmp_path / "again") == serial and len(serial) > 3
    said = capsys.readouterr().err
    assert "a worker process died: killed by SIGKILL, on Linux often the out-of-memory killer" in said
    assert "(1 of at most 2)" in said


def test_threads_sharing_the_pool_all_get_their_results_after_a_death(tmp_path, capsys):
    """What several modules generated at once go through: every thread's unfinished jobs are resubmitted to the
    one fresh pool, which is started once however many threads saw the old one break."""
    marker = str(tmp_path / "exited")
    jobs = [[(double, number) for number in range(start, start + 5)] for start in (0, 10, 20)]
    with pool.shared_pool(2), ThreadPoolExecutor(3) as threads:
        results = list(threads.map(lambda batch: pool.run_jobs(functools.partial(die_once, marker, "exit"), batch, 2),
                                   jobs))
    assert results == [[2 * n for n in range(start, start + 5)] for start in (0, 10, 20)]
    said = capsys.readouterr().err
    assert said.count("a worker process died: exit code 7.") == 1


def test_a_pool_that_keeps_dying_ends_the_generation_with_how(capsys):
    with pytest.raises(pool.WorkersDied, match=r"died again, after 2 fresh pools: killed by SIGKILL"):
        pool.run_jobs(always_die, [(number,) for number in range(4)], workers=2)
    assert capsys.readouterr().err.count("unfinished cases are written again") == pool.MAX_RESTARTS


def test_an_error_a_job_raises_is_its_own_and_restarts_nothing(capsys):
    shared = pool.RestartingPool(2)
    try:
        with pytest.raises(ValueError, match="case 3 is malformed"):
            shared.run(refuse, [(number,) for number in range(5)])
        assert shared.restarts == 0
        assert shared.run(double, [(1,), (2,)]) == [2, 4]  # the pool still serves
    finally:
        shared.close()
    assert capsys.readouterr().err == ""

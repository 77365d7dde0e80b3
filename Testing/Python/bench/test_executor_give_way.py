"""A slot that gives way (no worker can be placed: :class:`WorkerUnavailable`) puts its episode back in the queue, and
a thread is always left to take it: an idle slot thread waits while another still runs an episode instead of ending.
Once the other slot had already ended, the episode stayed queued with nobody to run it and the run waited forever
(seen under load in test_runner_ray's node-loss test, where a slot gives way after a 2 s placement timeout)."""

from __future__ import annotations

import threading

from MedOpenClawLib.bench.cases import Case
from MedOpenClawLib.bench.executors import EpisodeJob, LocalExecutor, WorkerUnavailable, record
from MedOpenClawLib.bench.tasks import EpisodeTask, RunConfig


class PlacedWorker:
    """What a slot holds of a placed worker (the fields WorkerSlot and EpisodeJob read)."""

    pid, node = 7, "node-a"

    def alive(self) -> bool:
        return True

    def kill(self) -> None:
        pass

    def close(self) -> None:
        pass


class AnsweringJob(EpisodeJob):
    """The real attempt loop and error policy around an attempt that answers at once on the slot's worker."""

    def attempt(self, worker, task, attempt, on_round=None):
        return record(task, attempt, response=f"ran on {worker.node}", invalid=None)


def test_an_episode_given_back_after_the_other_slot_ran_out_of_work_still_runs(tmp_path):
    first_taken = threading.Event()

    def launch(directory):
        if directory.name == "w0":
            return PlacedWorker()
        # w1 gives way only once w0 has finished its episode and found the queue empty
        first_taken.wait()
        pool._threads[0].join(timeout=1.0)  # time for w0 to end, had it not waited for the episode to come back
        raise WorkerUnavailable("no node could host a worker within 2 s")

    config = RunConfig(module="ucsf-pdgm", agent="oracle", out=tmp_path / "run", cases_dir=tmp_path, workers=2)
    pool = LocalExecutor(AnsweringJob(config, None, None), workers=2, launch=launch)
    pool.submit([EpisodeTask(Case("ucsf-pdgm", f"C{index}", "data", []), repeat=1) for index in range(2)])
    first = pool.next_result(60.0)
    first_taken.set()
    second = pool.next_result(60.0)  # the given-back episode, run by w0
    assert first is not None and second is not None
    assert sorted(task.case.case_id for task, _ in (first, second)) == ["C0", "C1"]
    assert pool.outstanding() == 0 and pool.slots[1].retired and not pool.slots[0].retired
    pool.close()
    assert not any(thread.is_alive() for thread in pool._threads)

"""``--workers auto`` and the executor flags: several model-bound workers per core, one per core for offline
agents, never more than memory carries; Ray actors declare the same CPU share and fit the cluster's resources."""

from __future__ import annotations

from contextlib import nullcontext

import pytest

from MedOpenClawLib.bench.concurrency import API_BOUND_WORKERS_PER_CORE, auto_workers, resolve_workers
from MedOpenClawLib.bench.ray_executor import ActorResources, actor_resources
from MedOpenClawLib.bench.tasks import RunConfig
from MedOpenClawLib.cli import main

GIB = 1 << 30


def test_model_bound_runs_take_several_workers_per_core_offline_runs_one():
    assert auto_workers(True, cpus=2, memory_bytes=64 * GIB) == 2 * API_BOUND_WORKERS_PER_CORE
    assert auto_workers(False, cpus=2, memory_bytes=64 * GIB) == 2


def test_memory_caps_the_worker_count_and_at_least_one_worker_runs():
    assert auto_workers(True, cpus=16, memory_bytes=4 * GIB) == 3  # 80 % of 4 GiB at 1 GiB per worker
    assert auto_workers(True, cpus=16, memory_bytes=GIB // 4) == 1


def test_auto_is_resolved_from_the_run_and_numbers_are_kept(tmp_path):
    config = RunConfig(module="ucsf-pdgm", agent="oracle", out=tmp_path, cases_dir=tmp_path, workers="auto")
    assert resolve_workers(config, capacity=5) == 5
    assert 1 <= resolve_workers(config)
    config.workers = 3
    assert resolve_workers(config, capacity=5) == 3


def test_actor_resources_follow_the_same_rule_and_fit_the_cluster():
    cluster = {"CPU": 4.0, "memory": 20.0 * GIB, "GPU": 2.0}
    model = actor_resources(True, "A", False, cluster)
    assert model.num_cpus == 1 / API_BOUND_WORKERS_PER_CORE and model.num_gpus == 0
    assert model.fits(cluster) == 16  # CPU-bound: 4 / 0.25
    track_b = actor_resources(False, "B", False, cluster)
    assert track_b.num_gpus == 1 and track_b.fits(cluster) == 2  # two GPUs
    assert actor_resources(False, "B", False, {"CPU": 4.0, "memory": 8.0 * GIB}).num_gpus == 0
    assert actor_resources(False, "B", False, cluster, num_gpus=0.5).fits(cluster) == 4  # --ray-gpus-per-worker
    slicer = actor_resources(False, "A", True, cluster)
    assert slicer.options()["resources"] == {"slicer": 1} and slicer.fits(cluster) == 0  # no node has Slicer
    assert ActorResources(num_cpus=1, memory_bytes=4 * GIB).fits({"CPU": 8.0, "memory": 10.0 * GIB}) == 2


@pytest.mark.parametrize("flags, message", [
    (["--workers", "0"], "positive number of workers"),
    (["--workers", "many"], "positive number of workers"),
    (["--ray-address", "10.0.0.1:6379"], "need --executor ray"),
])
def test_bad_executor_flags_are_usage_errors(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) if "--workers" in flags else nullcontext():
        code = main(["bench", "run", "--module", "ucsf-pdgm", "--agent", "oracle", "--cases", str(tmp_path),
                     "--out", str(tmp_path / "run"), *flags])
        assert code == 2
    assert message in capsys.readouterr().err


"""How many episodes to run at once (``--workers auto``), for the local pool and for Ray actors alike.

An episode with an offline agent keeps its viewer busy: one worker per core. An episode with a model agent
waits on the model most of the time (seconds per turn against milliseconds of viewer work), so several
episodes share a core; ``scripts/bench_scale.py`` measures how many (``bench/scale.json``). Either way a
worker holds a Slicer scene with the case's volumes, so memory caps the count too.
"""

from __future__ import annotations

import os

# measured by scripts/bench_scale.py (bench/scale.json): a headless worker peaks at ~0.50 GiB RSS on a full-size
# synthetic brain MRI case (4 sequences at 1 mm), its Ray actor adds ~0.09 GiB; 1 GiB leaves room for CT + PET
WORKER_MEMORY_BYTES = 1 << 30
# model-bound episodes per core: with 2 s model turns an episode took ~12 s of wall time but ~2.9 s of worker CPU;
# 8 workers on 2 cores ran 5.1x the episodes/hour of one, at +55 % time per episode. Four per core keeps that
# latency cost bounded; slower models (more seconds per turn) can take explicit larger --workers
API_BOUND_WORKERS_PER_CORE = 4
MEMORY_FRACTION = 0.8  # of the memory available now; the rest stays for the driver and the system


def available_memory() -> int:
    """Bytes of memory available to new processes (MemAvailable on Linux, free pages elsewhere)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def cpus_per_worker(api_bound: bool) -> float:
    """The CPU share one worker needs: what a Ray actor declares, and the local pool's per-core rule."""
    return 1.0 / API_BOUND_WORKERS_PER_CORE if api_bound else 1.0


def auto_workers(api_bound: bool, cpus: float | None = None, memory_bytes: int | None = None,
                 worker_memory_bytes: int = WORKER_MEMORY_BYTES) -> int:
    """Workers that ``cpus`` cores and ``memory_bytes`` (default: this machine, now) carry; at least one."""
    cpus = (os.cpu_count() or 1) if cpus is None else cpus
    memory_bytes = available_memory() if memory_bytes is None else memory_bytes
    by_cpu = int(cpus / cpus_per_worker(api_bound) + 1e-9)
    by_memory = int(memory_bytes * MEMORY_FRACTION // worker_memory_bytes)
    return max(1, min(by_cpu, by_memory))


def api_bound(config) -> bool:
    """Whether a run's episodes wait on a model provider (a :class:`~.tasks.RunConfig` with a provider)."""
    return config.provider is not None


def resolve_workers(config, capacity: int | None = None) -> int:
    """``config.workers``, with ``auto`` resolved to ``capacity`` (default: what this machine carries)."""
    if config.workers != "auto":
        return int(config.workers)
    return capacity if capacity is not None else auto_workers(api_bound(config))

"""Scale-out benchmark: episodes per hour against concurrent workers (1, 2, 4, 8) for the local process pool and
for Ray actors on this machine, with a model agent talking to a fake OpenAI-compatible server on loopback that
answers each turn after ``--delay`` seconds (an API-bound model). Writes bench/scale.json.

Each episode is a real one on the embedded synthetic ucsf-pdgm cohort at its ``full`` size (four sequences of
~197x233x189 voxels at 1 mm per case, the size of the real studies): preload, three tool rounds (scroll,
image_coords_to_ras, set_slice_offset) and a final answer, i.e. four model turns. Measured per configuration:
wall time, episodes/hour, per-episode time (the episode loop, and its tool time), peak memory per worker (worker
process; for Ray plus its actor process) and the driver's CPU seconds per episode (what bounds one driver). Ray's
overhead is its time per episode against the local pool's at the same number of workers. The projection for N
nodes follows from those numbers (see ``projection.method`` in the output).

    nice -n 10 python scripts/bench_scale.py [--delay 2] [--workers 1 2 4 8] [--out bench/scale.json]
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Testing" / "Python"))

from agents_fakes import FakeModelServer, Scripted, openai_reply  # noqa: E402

from MedOpenClawLib.bench.agents.model import ModelAgent  # noqa: E402
from MedOpenClawLib.bench.cases import load_cases  # noqa: E402
from MedOpenClawLib.bench.cohort_cache import synthetic_cases  # noqa: E402
from MedOpenClawLib.bench.concurrency import auto_workers  # noqa: E402
from MedOpenClawLib.bench.outcomes import write_json_atomic  # noqa: E402
from MedOpenClawLib.bench.preload import module_prompt  # noqa: E402
from MedOpenClawLib.bench.runner import BenchmarkRunner, local_executor  # noqa: E402
from MedOpenClawLib.bench.tasks import RunConfig  # noqa: E402
from MedOpenClawLib.providers import ProviderConfig, make_provider  # noqa: E402
from MedOpenClawLib.worker.client import WorkerEnvironment, WorkerProcess  # noqa: E402

MODULE = "ucsf-pdgm"
TURNS = [  # what the fake model answers at each turn of every conversation
    openai_reply(calls=[("scroll", '{"view": "axial", "direction": "up", "num_slices": 5, "size": 512}')]),
    openai_reply(calls=[("image_coords_to_ras", '{"view": "axial", "point_1000": [500, 500]}')]),
    openai_reply(calls=[("set_slice_offset", '{"view": "axial", "offset": 10, "size": 512}')]),
    openai_reply(text="**Findings**: lesion.\nKEY_SLICE_AXIAL_MM: 10\nKEY_SLICE_SAGITTAL_MM: 0\n"
                      "KEY_SLICE_CORONAL_MM: 0\nANSWER: A"),
]


def serve_model(delay_s: float, port_queue) -> None:
    """The fake model, in its own process so its JSON parsing is not counted as driver CPU."""

    def respond(body: dict) -> Scripted:
        turn = sum(message.get("role") == "assistant" for message in body["messages"])
        return Scripted(TURNS[min(turn, len(TURNS) - 1)], delay_s=delay_s)

    server = FakeModelServer([], respond=respond, keep_requests=False)
    port_queue.put(server.httpd.server_address[1])
    with server:
        threading.Event().wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class MemorySampler:
    """Peak resident memory and CPU time of each worker (plus its Ray actor process) while a run goes on."""

    def __init__(self, runner: BenchmarkRunner, period_s: float = 0.25):
        self.runner = runner
        self.period_s = period_s
        self.peaks: dict[int, int] = {}  # worker pid -> peak RSS of the worker (+ actor)
        self.cpu: dict[int, float] = {}  # worker pid -> CPU seconds of the worker (+ actor), last seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.period_s):
            for slot in list(self.runner.slots):
                worker = slot.worker
                if worker is None or not worker.pid:
                    continue
                info = getattr(worker, "info", {})  # a Ray worker: its actor process too
                pids = [worker.pid, *([info["actor_pid"]] if info.get("actor_pid") else [])]
                self.peaks[worker.pid] = max(self.peaks.get(worker.pid, 0), sum(rss_bytes(pid) for pid in pids))
                self.cpu[worker.pid] = max(self.cpu.get(worker.pid, 0.0), sum(cpu_seconds(pid) for pid in pids))

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


class TimedJob:
    """The runner's episode job, timed: a slot's worker start-up apart from each episode (preload, rounds,
    trace transfer) -- the steady state of a long run, where a worker serves hundreds of episodes."""

    def __init__(self, job):
        self.job = job
        self.config = job.config
        self.startup_s: list[float] = []
        self.episode_s: list[float] = []

    def __call__(self, slot, task, on_round=None) -> dict:
        began = time.perf_counter()
        if slot.worker is None:
            slot.ensure()
            self.startup_s.append(time.perf_counter() - began)
        ready = time.perf_counter()
        record = self.job(slot, task, on_round)
        self.episode_s.append(time.perf_counter() - ready)
        return record


def run(executor: str, workers: int, cases_dir: Path, out: Path, base_url: str) -> dict:
    limit = min(2 * workers, 4)
    config = RunConfig(module=MODULE, agent="model", out=out, cases_dir=cases_dir, workers=workers, limit=limit,
                       repeats=2 * workers // limit, save_images=True,
                       provider=ProviderConfig.resolve(model="fake-2s", provider="openai", base_url=base_url,
                                                       api_key="sk-bench", environ={}))

    def make_agent(task):
        return ModelAgent(make_provider(config.provider), name="model")

    if executor == "ray":
        from MedOpenClawLib.bench.ray_executor import RayExecutor

        def make_executor(job, config, on_round):
            return RayExecutor(job, on_round)
    else:
        make_executor = local_executor
    runner = BenchmarkRunner(config, make_agent, module_prompt, progress_stream=io.StringIO(),
                             make_executor=make_executor)
    timed = runner.job = TimedJob(runner.job)
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    with MemorySampler(runner) as memory:
        summary = runner.run()
    wall = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    driver_cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    outcomes = [json.loads(path.read_text())["outcome"] for path in sorted((out / "episodes").glob("*/result.json"))]
    episodes = summary["episodes"]
    peaks = list(memory.peaks.values())
    return {
        "executor": executor,
        "workers": workers,
        "episodes": episodes,
        "invalid": summary["invalid"],
        "errors": summary.get("errors", 0),
        "wall_s": round(wall, 2),
        "episodes_per_hour": round(episodes / wall * 3600, 1),
        "worker_seconds_per_episode": round(wall * workers / max(episodes, 1), 2),
        "worker_startup_s_mean": round(statistics.mean(timed.startup_s), 2),
        "episode_s_p50": round(statistics.median(timed.episode_s), 3),
        "episode_loop_s_p50": round(statistics.median(o["wall_seconds"] for o in outcomes), 3),
        "tool_s_per_episode_p50": round(statistics.median(o["tool_seconds"] for o in outcomes), 3),
        "driver_cpu_s_per_episode": round(driver_cpu / max(episodes, 1), 3),
        "worker_cpu_s_per_episode": round(sum(memory.cpu.values()) / max(episodes, 1), 3),
        "peak_rss_mib_per_worker_mean": round(statistics.mean(peaks) / 2**20, 1) if peaks else None,
        "peak_rss_mib_per_worker_max": round(max(peaks) / 2**20, 1) if peaks else None,
    }


def time_calls(worker, case, out: Path, calls: int) -> dict:
    """Median milliseconds of an image-returning call (observe, three 512 px views), of a plain call
    (get_viewer_state), and of ending the episode (for Ray: bringing its trace and images home)."""
    env = WorkerEnvironment(worker)
    env.start("radiology", [str(case.data_root)], "A", 20, str(out / "episodes" / "timing" / "trace-1.jsonl"),
              {"episode_id": "timing"}, True)
    env.call("open_case", {"dicom_dir": str(case.path(case.open_paths[0])), "size": 64}, actor="system")

    def median_ms(name: str, arguments: dict) -> float:
        samples = []
        for _ in range(calls):
            began = time.perf_counter()
            env.call(name, arguments, actor="system")
            samples.append(time.perf_counter() - began)
        return round(1000 * statistics.median(samples), 2)

    timings = {"image_call_ms": median_ms("observe", {"size": 512}),
               "plain_call_ms": median_ms("get_viewer_state", {})}
    began = time.perf_counter()
    env.end()
    timings["episode_end_ms"] = round(1000 * (time.perf_counter() - began), 2)
    return timings


def call_overhead(cases_dir: Path, scratch: Path, calls: int = 20) -> dict:
    """What one tool call and one episode end cost through a Ray actor against a local worker process: the
    per-episode overhead of Ray, measured directly rather than as a difference of noisy episode times."""
    import ray

    from MedOpenClawLib.bench.ray_actor import WorkerHost
    from MedOpenClawLib.bench.ray_executor import CaseShipper, RayWorker

    case = load_cases(cases_dir)[0]
    local = WorkerProcess(scratch / "timing-local" / "worker").start()
    try:
        local_ms = time_calls(local, case, scratch / "timing-local", calls)
    finally:
        local.close()
    actor = ray.remote(WorkerHost).options(num_cpus=0.25).remote(None, 120.0, 300.0)
    remote = RayWorker(actor, scratch / "timing-ray", 300.0, 120.0, CaseShipper(cases_dir)).start()
    try:
        ray_ms = time_calls(remote, case, scratch / "timing-ray", calls)
    finally:
        remote.close()
    return {"local": local_ms, "ray": ray_ms,
            "extra_ms": {key: round(ray_ms[key] - local_ms[key], 2) for key in local_ms}}


def actions_per_episode(out: Path) -> dict:
    """Image-returning and other actions in one episode's trace (preload included)."""
    from MedOpenClawLib.core.audit import read_trace

    record = json.loads(next((out / "episodes").glob("*/result.json")).read_text())
    actions = [r for r in read_trace(out / record["trace"]) if r["kind"] == "action"]
    images = sum(bool(r["result"]["images"]) for r in actions)
    return {"image_calls": images, "plain_calls": len(actions) - images}


def projection(runs: list[dict], delay_s: float) -> dict:
    """Episodes/hour on N nodes shaped like this machine, from the steady state measured with Ray at the most
    workers: time per episode on a warm worker, worker memory and the driver's CPU per episode."""
    ref = max((r for r in runs if r["executor"] == "ray"), key=lambda r: r["workers"])
    per_worker = 3600 / ref["episode_s_p50"]
    driver_cap = 3600 / max(ref["driver_cpu_s_per_episode"], 1e-3)
    node_cpus = os.cpu_count() or 1
    node_memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    per_node = auto_workers(True, cpus=node_cpus, memory_bytes=node_memory,
                            worker_memory_bytes=int(ref["peak_rss_mib_per_worker_max"] * 2**20))
    table = []
    for nodes in (1, 2, 4, 8, 16, 32, 64):
        linear = nodes * per_node * per_worker
        table.append({"nodes": nodes, "workers": nodes * per_node, "episodes_per_hour": round(min(linear, driver_cap)),
                      "driver_bound": linear > driver_cap})
    return {
        "method": (
            f"per worker {per_worker:.0f} episodes/h = 3600 / the time per episode on a warm Ray worker at "
            f"{ref['workers']} workers ({ref['episode_s_p50']:g} s with {delay_s:g} s model turns) x "
            f"{per_node} workers per node (--workers auto on a node like this one: {node_cpus} cores, "
            f"{node_memory / 2**30:.0f} GiB, {ref['peak_rss_mib_per_worker_max']:g} MiB per worker) x N nodes, "
            f"capped by one driver at {driver_cap:.0f} episodes/h = 3600 / its CPU seconds per episode "
            f"({ref['driver_cpu_s_per_episode']:g} s: agent, prompts, images, scoring and writing run in the "
            "driver's one Python process). Actor start-up is paid once per worker and vanishes over a long run. "
            "Assumes the model endpoint keeps its per-turn latency at that concurrency (its rate limit is the "
            "usual cap) and that nodes have more cores scale per core; beyond the driver cap, split the cases "
            "over several drivers (one --out each; bench report merges runs)."),
        "per_worker_episodes_per_hour": round(per_worker, 1),
        "workers_per_node": per_node,
        "driver_cap_episodes_per_hour": round(driver_cap),
        "table": table,
    }


def direct_overhead(calls: dict, actions: dict, runs: list[dict]) -> dict:
    """Ray's extra time per episode from the measured per-call costs and an episode's actions, against the
    local pool's time per episode at one worker."""
    extra = calls["extra_ms"]
    extra_s = (actions["image_calls"] * extra["image_call_ms"] + actions["plain_calls"] * extra["plain_call_ms"]
               + extra["episode_end_ms"]) / 1000
    base = min((r for r in runs if r["executor"] == "local"), key=lambda r: r["workers"])["episode_s_p50"]
    return {"extra_s": round(extra_s, 3), "local_episode_s": base, "pct": round(100 * extra_s / base, 2)}


def overheads(runs: list[dict]) -> list[dict]:
    """Ray against the local pool at the same number of workers."""
    local = {r["workers"]: r for r in runs if r["executor"] == "local"}
    rows = []
    for r in runs:
        base = local.get(r["workers"])
        if r["executor"] != "ray" or base is None:
            continue
        per_episode = r["episode_s_p50"] / base["episode_s_p50"] - 1
        startup = r["worker_startup_s_mean"] - base["worker_startup_s_mean"]
        rows.append({
            "workers": r["workers"],
            "per_episode_pct": round(100 * per_episode, 2),
            "worker_startup_s_extra": round(startup, 2),
            "tool_time_ms_per_episode": round(1000 * (r["tool_s_per_episode_p50"] - base["tool_s_per_episode_p50"]), 1),
            "end_to_end_pct_this_run": round(100 * (r["worker_seconds_per_episode"] / base["worker_seconds_per_episode"]
                                                    - 1), 2),
            "end_to_end_pct_at_100_episodes_per_worker": round(
                100 * (per_episode + startup / (100 * base["episode_s_p50"])), 2),
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=2.0, help="seconds the fake model takes per turn")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--executors", nargs="+", default=["local", "ray"], choices=["local", "ray"])
    parser.add_argument("--scratch", default=None, help="where run directories go (default: a temporary one)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "scale.json"))
    args = parser.parse_args()

    import tempfile

    cases_dir = synthetic_cases(MODULE, size="full", cases=4)  # 1 mm brains, as UCSF-PDGM's studies
    port_queue = multiprocessing.Queue()
    model = multiprocessing.Process(target=serve_model, args=(args.delay, port_queue), daemon=True)
    model.start()
    base_url = f"http://127.0.0.1:{port_queue.get(timeout=60)}/v1"
    runs = []
    ray_started = measured_calls = per_episode_actions = None
    try:
        with tempfile.TemporaryDirectory(dir=args.scratch) as scratch:
            for executor in args.executors:
                if executor == "ray":
                    import ray

                    began = time.perf_counter()
                    ray.init(num_cpus=os.cpu_count(), object_store_memory=128 << 20, include_dashboard=False,
                             logging_level="WARNING", log_to_driver=False)
                    ray_started = round(time.perf_counter() - began, 2)
                for workers in args.workers:
                    result = run(executor, workers, cases_dir, Path(scratch) / f"{executor}-w{workers}", base_url)
                    print(json.dumps(result), file=sys.stderr)
                    runs.append(result)
                if executor == "ray":
                    measured_calls = call_overhead(cases_dir, Path(scratch))
                    ray.shutdown()
                per_episode_actions = actions_per_episode(Path(scratch) / f"{executor}-w{args.workers[0]}")
    finally:
        model.kill()
    overhead = overheads(runs)
    report = {
        "what": ("model agent (4 turns: 3 tool rounds + answer) against a fake OpenAI-compatible server on 127.0.0.1 "
                 f"answering each turn after {args.delay:g} s, on the synthetic {MODULE} cohort at full size (4 "
                 "sequences of ~197x233x189 voxels at 1 mm per case, as the real studies); episodes = 2 x workers; "
                 "episodes/hour include worker (and actor) start-up, case preload, scoring and writing; per episode = "
                 "one episode on a warm worker (preload, rounds, trace transfer), worker start-up apart; Ray overhead:"
                 " per_episode_pct (steady state), worker_startup_s_extra (once per actor), end_to_end_pct_this_run (2"
                 " episodes per worker, so start-up weighs heavily) and at 100 episodes per worker -- differences of "
                 "episode times on a shared, loaded machine are noisy, so ray_overhead_per_episode is also computed "
                 "from directly timed calls (ray_call_overhead: median of 20 observe / get_viewer_state calls and one "
                 "episode end, local worker vs Ray actor) times the actions of an episode; memory = peak RSS of each "
                 "worker process (Ray: plus its actor process)"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "shared": True},
        "model_delay_s": args.delay,
        "ray_local_cluster_start_s": ray_started,
        "runs": runs,
        "ray_overhead_vs_local": overhead,
        "ray_overhead_target_pct": 5,
    }
    if measured_calls:
        report["ray_call_overhead"] = measured_calls
        report["actions_per_episode"] = per_episode_actions
        report["ray_overhead_per_episode"] = direct_overhead(measured_calls, per_episode_actions, runs)
    if any(r["executor"] == "ray" for r in runs):
        report["projection"] = projection(runs, args.delay)
    write_json_atomic(Path(args.out), report)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Suite-time benchmark: where the ``bash scripts/test.sh`` minutes go, so that they can be kept under CI's 10.

Two measurements, each added to bench/suite.json under its label (a run with the same label and mode is replaced):

``groups``: every ctest test of a configured build tree (``cmake ... -DMEDOPENCLAW_STANDALONE_TESTS=ON``) run
alone, one after the other, with its own command, environment and working directory as ctest has them. Records
wall seconds and CPU seconds (user + system of every process the test started, from a cpuacct cgroup where one
can be made, else of its process tree from ``wait4``: on a shared machine the CPU is the figure to compare) and,
for the pytest groups, the slowest test items (pytest ``--durations``). The cohort is generated first (the
demo_cohort test), as ctest's fixture does.

``full``: the README's command, ``bash scripts/test.sh``, on a fresh clone of the committed HEAD (set-up included;
the package caches are the machine's, warm), timed as a whole, with each ctest test's wall seconds as ctest
printed them, the load average before and after, and how the machine's cores spent the run (``/proc/stat``:
user, system, idle, and stolen by the hypervisor, which on a shared virtual machine slows every test alike).

    python scripts/bench_suite.py groups --build build [--label after] [--only pytest_bench demo_cohort]
    python scripts/bench_suite.py full [--label after] [--jobs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "suite.json"
CTEST_LINE = re.compile(r"Test\s+#\d+: (\S+) \.+\**\s*(\w[\w* ]*?)\s+(\d+\.\d+) sec")
SLOWEST = 15


def run_measured(command: list[str], env: dict[str, str], cwd: str | None = None) -> tuple[int, float, dict, str]:
    """Run ``command`` under ``nice`` (other work shares the machine) and return its exit status, wall seconds,
    CPU seconds and its output.

    The CPU is given twice: ``reaped`` from ``wait4`` (the command and the children it reaped) and, where this
    machine lets a process make a cpuacct cgroup (root on cgroup v1), ``cgroup``: every process the command started,
    the daemons that outlive their parent too (Ray's raylet and GCS, servers a test started in the background),
    which ``wait4`` never sees."""
    with tempfile.TemporaryFile(mode="w+") as log, CpuGroup() as group:
        started = time.perf_counter()
        env = {**env, **group.environment()}
        process = subprocess.Popen(["nice", "-n", "10", *command], env=env, cwd=cwd, stdout=log,
                                   stderr=subprocess.STDOUT, text=True, preexec_fn=group.join)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        cpu = {"reaped": round(usage.ru_utime + usage.ru_stime, 1)}
        if group.path:
            cpu["cgroup"] = round(group.seconds(), 1)
        log.seek(0)
        return process.returncode, wall, cpu, log.read()


def cgroup_seconds(group: Path) -> float:
    """The CPU seconds of every process that has been in the cpuacct ``group``."""
    return int((group / "cpuacct.usage").read_text()) / 1e9


class CpuGroup:
    """A cgroup v1 ``cpuacct`` group for one measured command (none where it cannot be made: ``path`` is None).

    Processes that are still running when the command ends (a leaked daemon) are counted up to that moment and
    moved back to the root group, so that the group can be removed."""

    ROOT = Path("/sys/fs/cgroup/cpuacct")

    def __enter__(self) -> CpuGroup:
        try:
            self.path = Path(tempfile.mkdtemp(prefix="bench-suite-", dir=self.ROOT))
        except OSError:
            self.path = None
        return self

    def join(self) -> None:
        """In the child before it executes the command: it, and so all it starts, belongs to the group."""
        if self.path:
            (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def environment(self) -> dict[str, str]:
        """Where the pytest plugin below reads the group's CPU for each test item."""
        return {"BENCH_SUITE_CGROUP": str(self.path)} if self.path else {}

    def seconds(self) -> float:
        return cgroup_seconds(self.path)

    def __exit__(self, *exc) -> None:
        if not self.path:
            return
        for _ in range(50):  # a process forked meanwhile appears in the next read
            leftover = (self.path / "cgroup.procs").read_text().split()
            if not leftover:
                break
            for pid in leftover:
                try:
                    (self.ROOT / "cgroup.procs").write_text(pid)
                except OSError:
                    pass  # it ended meanwhile
        self.path.rmdir()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """This file is also a pytest plugin (``-p bench_suite``): each test item's wall and CPU seconds (setup, call
    and teardown; the CPU of the group's cgroup meanwhile, else of this process and the children it reaped),
    appended as JSON lines to BENCH_SUITE_ITEMS."""
    before, started = _cpu_now(), time.perf_counter()
    yield
    wall, cpu = time.perf_counter() - started, _cpu_now() - before
    with open(os.environ["BENCH_SUITE_ITEMS"], "a") as items:
        items.write(json.dumps({"item": item.nodeid.split("Testing/Python/")[-1], "wall_s": round(wall, 2),
                                "cpu_s": round(cpu, 2)}) + "\n")


def _cpu_now() -> float:
    if "BENCH_SUITE_CGROUP" in os.environ:
        return cgroup_seconds(Path(os.environ["BENCH_SUITE_CGROUP"]))
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def slowest_items(path: Path) -> dict:
    """The test items of a group that cost the most CPU, and those that waited the longest (wall - CPU)."""
    items = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    for item in items:
        item["waited_s"] = round(item["wall_s"] - item["cpu_s"], 2)
    return {"by_cpu": sorted(items, key=lambda item: -item["cpu_s"])[:SLOWEST],
            "by_wait": sorted(items, key=lambda item: -item["waited_s"])[:SLOWEST]}


def ctest_tests(build: Path) -> list[dict]:
    """The tests of the configured build tree, in ctest's order, as ctest --show-only=json-v1 lists them."""
    listing = subprocess.run(["ctest", "--test-dir", str(build), "--show-only=json-v1"], capture_output=True,
                             text=True, check=True)
    tests = []
    for test in json.loads(listing.stdout)["tests"]:
        properties = {item["name"]: item["value"] for item in test.get("properties", [])}
        tests.append({"name": test["name"], "command": test["command"],
                      "environment": properties.get("ENVIRONMENT", []),
                      "cwd": properties.get("WORKING_DIRECTORY"),
                      "cohort": "demo_cohort" in properties.get("FIXTURES_REQUIRED", [])})
    return tests


def measure_groups(build: Path, only: list[str] | None, cache: str | None) -> dict:
    results = {}
    tests = ctest_tests(build)
    # the cohort first, as ctest's fixture orders it; it is measured like any other test
    tests.sort(key=lambda test: test["name"] != "demo_cohort")
    for test in tests:
        if only and test["name"] not in only and test["name"] != "demo_cohort":
            continue
        env = {**os.environ, **dict(item.split("=", 1) for item in test["environment"])}
        if cache:
            env["MEDOPENCLAW_CACHE"] = cache
        command = list(test["command"])
        is_pytest = command[1:3] == ["-m", "pytest"]
        items = Path(tempfile.mkdtemp(prefix="bench-suite-")) / "items.jsonl"
        if is_pytest:  # this file as a plugin: each item's wall and CPU
            command[3:3] = ["-p", "bench_suite"]
            env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")])
            env["BENCH_SUITE_ITEMS"] = str(items)
        load = os.getloadavg()[0]
        code, wall, cpu, output = run_measured(command, env, test["cwd"])
        results[test["name"]] = {"wall_s": round(wall, 1), "cpu_s": cpu.get("cgroup", cpu["reaped"]),
                                 "cpu_reaped_s": cpu["reaped"], "exit": code,
                                 "load_1min_before": round(load, 2), "needs_cohort": test["cohort"]}
        if is_pytest:
            summary = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|skipped)", line)]
            results[test["name"]]["summary"] = summary[-1].strip("= ") if summary else None
            results[test["name"]]["slowest"] = slowest_items(items)
        shutil.rmtree(items.parent)
        print(test["name"], json.dumps({k: v for k, v in results[test["name"]].items() if k != "slowest"}),
              flush=True)
        if code not in (0, 5):
            print(output[-4000:], file=sys.stderr)
    return {"groups": results, "wall_sum_s": round(sum(item["wall_s"] for item in results.values()), 1),
            "cpu_sum_s": round(sum(item["cpu_s"] for item in results.values()), 1)}


def measure_full(jobs: int | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-suite-") as scratch:
        clone = Path(scratch) / "clone"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        env = {**os.environ, "MEDOPENCLAW_CACHE": str(Path(scratch) / "cache")}
        env.pop("PYTHONPATH", None)
        env.pop("MEDOPENCLAW_TEST_JOBS", None)
        if jobs:
            env["MEDOPENCLAW_TEST_JOBS"] = str(jobs)
        load, cores = os.getloadavg(), core_ticks()
        code, wall, cpu, output = run_measured(["bash", "scripts/test.sh"], env, str(clone))
        spent = [after - before for before, after in zip(cores, core_ticks())]
        tests = {match[1]: {"wall_s": float(match[3]), "result": match[2].strip()}
                 for match in map(CTEST_LINE.search, output.splitlines()) if match}
        total = re.search(r"Total Test time \(real\) =\s+(\d+\.\d+) sec", output)
        summary = re.search(r"\d+% tests passed.*", output)
        announced = re.search(r"^test: ctest, (\d+) at a time", output, re.MULTILINE)
        if code:
            print(output[-6000:], file=sys.stderr)
        return {"wall_s": round(wall, 1), "cpu_s": cpu.get("cgroup", cpu["reaped"]), "cpu_reaped_s": cpu["reaped"],
                "exit": code, "jobs": int(announced[1]) if announced else jobs,
                "ctest_real_s": float(total[1]) if total else None,
                "setup_and_configure_s": round(wall - float(total[1]), 1) if total else None,
                "summary": summary[0] if summary else None,
                "load_average_before": [round(value, 2) for value in load],
                "load_average_after": [round(value, 2) for value in os.getloadavg()],
                "cores_percent": {name: round(100 * ticks / sum(spent), 1) for name, ticks in zip(CORE_STATES, spent)},
                "tests": dict(sorted(tests.items(), key=lambda item: -item[1]["wall_s"]))}


CORE_STATES = ("user", "system", "idle", "steal")


def core_ticks() -> list[int]:
    """All cores' time so far in :data:`CORE_STATES` (``/proc/stat``; nice counts as user, iowait as idle,
    interrupts as system)."""
    user, nice, system, idle, iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return [user + nice, system + irq + softirq, idle + iowait, steal]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("groups", "full"))
    parser.add_argument("--label", default="current", help="the name this run is stored under (e.g. before, after)")
    parser.add_argument("--build", type=Path, default=ROOT / "build", help="groups: the configured build tree")
    parser.add_argument("--only", nargs="+", help="groups: these ctest tests only (demo_cohort always runs first)")
    parser.add_argument("--cache", help="groups: the MEDOPENCLAW_CACHE to use (default: the build tree's)")
    parser.add_argument("--jobs", type=int, help="full: ctest -j (default: scripts/test.sh's, the cores + 1)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    measured = (measure_groups(args.build, args.only, args.cache) if args.mode == "groups"
                else measure_full(args.jobs))
    run = {"label": args.label, "mode": args.mode, "commit": commit, "cpus": os.cpu_count(),
           "date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), **measured}
    report = json.loads(args.out.read_text()) if args.out.exists() else {
        "benchmark": "scripts/bench_suite.py: the suite's ctest tests, wall and CPU seconds (cgroup, else wait4) each; "
                     "and bash scripts/test.sh on a fresh clone",
        "note": "a shared 2-core machine: compare CPU seconds; read wall seconds with the load average",
        "runs": []}
    report["runs"] = [item for item in report["runs"]
                      if (item["label"], item["mode"]) != (args.label, args.mode)] + [run]
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in run.items() if k not in ("groups", "tests")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

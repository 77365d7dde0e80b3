"""Benchmark: how the cost of ``bench score``, ``bench report``, ``trace verify``, ``trace audit`` and a resumed
``bench run`` grows with the work, as growth exponents (the slope of log CPU time against log size).

Every command runs as the user types it, in a child process; its CPU time (user + system) and peak RSS come from
``os.wait4``, so a machine loaded by other work changes little (wall time is recorded beside it). The exponent is
fitted on the CPU time above the command's fixed cost (the same command on a tiny input: interpreter start,
imports): 1.0 is linear, 2.0 quadratic. Inputs are built from one real ``bench run`` (heuristic agent,
UCSF-PDGM, Track B, two repeats of one case, kept in ``--seed``), replicated:

- score: a package of N cases (the six synthetic cases' manifest entries and ground truth under new ids) and N
  oracle responses;
- report / resume: a run of N episodes over 6 cases (N/6 repeats each), every episode the seed's (its trace and
  step images hard-linked), so the stability of each case compares N/6 runs; ``bench report --no-evidence`` (the
  evidence views render each episode through the viewer engine: per-episode work, measured in
  bench/report.json); resume is ``bench run`` again on the finished run (nothing left to run);
- verify / audit: one trace of N records (the seed's records repeated, sequence and hash chain rewritten).

Crash recovery's growth (replaying a session of N calls) is taken from bench/recovery.json, which times it at
10, 100, 1000 and 3000 calls on a real viewer (``--only recovery`` re-reads it alone). Writes bench/scaling.json.
Run nice'd on a shared machine: ``nice -n 10 python scripts/bench_scaling.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "MedOpenClaw"))

from MedOpenClawLib.bench import modules  # noqa: E402
from MedOpenClawLib.bench.cases import load_ground_truth  # noqa: E402
from MedOpenClawLib.bench.kit.answers import Evidence  # noqa: E402
from MedOpenClawLib.core.audit import GENESIS, canonical_json, record_hash  # noqa: E402

MODULE = "ucsf-pdgm"
CASES = 6
SIZES = {"score": (1000, 4000, 16000), "report": (240, 960, 3840), "resume": (240, 960, 3840),
         "verify": (10000, 20000, 40000), "audit": (10000, 40000, 160000, 640000)}
TINY = {"score": 6, "report": 6, "resume": 6, "verify": 50, "audit": 50}


def cli(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "MedOpenClawLib.cli", *arguments]


def measured(command: list[str]) -> dict:
    """CPU seconds (user + system, from wait4), peak RSS and wall seconds of one child process."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "MedOpenClaw"),
                                                                os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    error = child.stderr.read().decode(errors="replace")[-400:]
    child.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    return {"cpu_s": round(usage.ru_utime + usage.ru_stime, 3), "wall_s": round(wall, 3),
            "max_rss_mb": round(usage.ru_maxrss / 1024, 1), "exit": code, **({"stderr": error} if code else {})}


# ------------------------------------------------------------------------------------------------ the inputs
def seed_run(seed: Path, cache: Path) -> Path:
    if not (seed / "summary.json").exists():
        result = measured(cli("bench", "run", "--module", MODULE, "--agent", "heuristic", "--track", "B",
                              "--limit", "1", "--repeats", "2", "--workers", "1", "--cache-dir", str(cache),
                              "--out", str(seed)))
        if result["exit"] != 0:
            raise SystemExit(f"the seed run failed: {result}")
    return seed


def package(seed: Path, out: Path, cases: int) -> tuple[Path, Path]:
    """A package of ``cases`` cases cloned from the seed run's package, and a responses file answering each."""
    source = Path(json.loads((seed / "run.json").read_text())["cases_dir"])
    manifest = json.loads((source / "manifest.json").read_text())
    originals = manifest["cases"]
    entries, lines = [], []
    for index in range(cases):
        base = originals[index % len(originals)]["case_id"]
        case_id = f"{base}-{index:06d}"
        entries.append(json.loads(json.dumps(originals[index % len(originals)]).replace(base, case_id)))
        hidden = out / "hidden" / case_id
        hidden.mkdir(parents=True)
        truth_text = (source / "hidden" / base / "ground_truth.json").read_text().replace(base, case_id)
        (hidden / "ground_truth.json").write_text(truth_text)
        for extra in (source / "hidden" / base).iterdir():
            if extra.name != "ground_truth.json":
                os.link(extra, hidden / extra.name)
        truth = load_ground_truth(out, case_id)
        answer = modules.get(MODULE).write_answer(truth.answers, Evidence.of_truth(truth))
        lines.append(json.dumps({"case_id": case_id, "response": answer}) + "\n")
    (out / "manifest.json").write_text(json.dumps({**manifest, "cases": entries}))
    responses = out / "responses.jsonl"
    responses.write_text("".join(lines))
    return out, responses


def run_folder(seed: Path, out: Path, episodes: int) -> Path:
    """A finished run of ``episodes`` episodes over the seed package's 6 cases, each the seed's first episode."""
    identity = json.loads((seed / "run.json").read_text())
    source = sorted((seed / "episodes").iterdir())[0]
    result_text = (source / "result.json").read_text()
    case = json.loads(result_text)["case_id"]
    repeats = episodes // CASES
    ids = []
    manifest = json.loads((Path(identity["cases_dir"]) / "manifest.json").read_text())
    for case_id in [entry["case_id"] for entry in manifest["cases"]][:CASES]:
        for repeat in range(1, repeats + 1):
            episode = f"{case_id}__r{repeat}"
            shutil.copytree(source, out / "episodes" / episode, copy_function=os.link)
            body = json.loads(result_text.replace(source.name, episode).replace(case, case_id))
            body["repeat"] = repeat
            (out / "episodes" / episode / "result.json").unlink()
            (out / "episodes" / episode / "result.json").write_text(json.dumps(body))
            ids.append(episode)
    summary = json.loads((seed / "summary.json").read_text())
    (out / "run.json").write_text(json.dumps({**identity, "invocations": identity["invocations"][:1]}))
    (out / "summary.json").write_text(json.dumps({**summary, "episode_ids": ids, "episodes": len(ids)}))
    (out / "repeats").write_text(str(repeats))
    return out


def long_trace(seed: Path, out: Path, records: int) -> Path:
    """One trace of ``records`` records: the seed trace's records over and over, its chain rewritten."""
    source = sorted((seed / "episodes").iterdir())[0]
    template = [json.loads(line) for line in (source / "trace-1.jsonl").read_text().splitlines()]
    head = template[:2]  # session_start, session_config
    body = [record for record in template[2:] if record["kind"] != "episode_end"]
    previous = GENESIS
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source / "trace-1_images", out.parent / "trace-1_images", copy_function=os.link,
                    dirs_exist_ok=True)
    with open(out, "w", encoding="utf-8") as handle:
        for seq in range(records):
            record = dict(head[seq] if seq < len(head) else body[(seq - len(head)) % len(body)])
            record.update(seq=seq, prev_hash=previous)
            record.pop("hash", None)
            record["hash"] = previous = record_hash(record)
            handle.write(canonical_json(record) + "\n")
    (out.parent / (out.name + ".anchor.json")).write_text(json.dumps({"records": records, "head": previous}))
    return out


# --------------------------------------------------------------------------------------------- measuring
def command_for(kind: str, seed: Path, scratch: Path, size: int, cache: Path) -> list[str]:
    folder = scratch / f"{kind}-{size}"
    if kind == "score":
        cases_dir, responses = package(seed, folder, size)
        return cli("bench", "score", "--module", MODULE, "--cases", str(cases_dir), "--responses", str(responses))
    if kind == "report":
        run = run_folder(seed, folder / "run", size)
        return cli("bench", "report", "--no-evidence", str(run), "--out", str(folder / "report"))
    if kind == "resume":
        run = run_folder(seed, folder / "run", size)
        cases_dir = json.loads((run / "run.json").read_text())["cases_dir"]
        return cli("bench", "run", "--module", MODULE, "--agent", "heuristic", "--track", "B", "--workers", "1",
                   "--repeats", (run / "repeats").read_text(), "--cases", cases_dir, "--out", str(run))
    trace = long_trace(seed, folder / "trace.jsonl", size)
    return cli("trace", "verify", str(trace)) if kind == "verify" else cli("trace", "audit", str(trace))


def exponent(sizes: list[int], costs: list[float]) -> float | None:
    """Least-squares slope of log(cost) on log(size)."""
    points = [(math.log(size), math.log(cost)) for size, cost in zip(sizes, costs) if cost > 0]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return round(sum((x - mean_x) * (y - mean_y) for x, y in points) / spread, 3)


def growth(kind: str, seed: Path, scratch: Path, cache: Path, sizes: tuple[int, ...]) -> dict:
    fixed = measured(command_for(kind, seed, scratch, TINY[kind], cache))
    rows = []
    for size in sizes:
        row = {"size": size, **measured(command_for(kind, seed, scratch, size, cache))}
        rows.append(row)
        print(kind, json.dumps(row), flush=True)
        shutil.rmtree(scratch / f"{kind}-{size}", ignore_errors=True)
    above = [max(row["cpu_s"] - fixed["cpu_s"], 1e-3) for row in rows]
    return {"fixed": {"size": TINY[kind], **fixed}, "sizes": rows,
            "exponent_cpu": exponent(list(sizes), above),
            "exponent_rss": exponent(list(sizes), [max(row["max_rss_mb"] - fixed["max_rss_mb"], 1.0) for row in rows]),
            "cpu_ms_per_unit": [round(1000 * cost / row["size"], 3) for cost, row in zip(above, rows)]}


def recovery_growth(path: Path) -> dict | None:
    """Crash to ready again (every call replayed on the spare viewer) at the sizes bench/recovery.json timed on a
    real viewer (not re-run here): the medians' wall time, and the CPU of the spare that replayed (load-proof)."""
    try:
        document = json.loads(path.read_text())
        medians = document["median_crash_to_ready_ms"]["spare_viewer"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    sizes = sorted(int(calls) for calls in medians)
    costs = [medians[str(calls)] for calls in sizes]
    growth = {"source": str(path.relative_to(ROOT)), "measure": "median crash-to-ready ms, spare viewer (wall)",
              "sizes": sizes, "costs_ms": costs, "exponent": exponent(sizes, costs),
              "exponent_above_fixed": exponent(sizes[1:], [max(cost - costs[0], 1e-3) for cost in costs[1:]]),
              "load_average_at_end": document.get("machine", {}).get("load_average_at_end")}
    child = document.get("median_cpu_ms", {}).get("spare_child")
    if child and sorted(int(calls) for calls in child) == sizes:
        cpu = [child[str(calls)] for calls in sizes]
        growth.update({"child_cpu_ms": cpu, "exponent_child_cpu": exponent(sizes, cpu),
                       "exponent_child_cpu_above_fixed": exponent(sizes[1:], [max(cost - cpu[0], 1e-3)
                                                                              for cost in cpu[1:]])})
    return growth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scratch", type=Path, required=True, help="a folder for the inputs (deleted per size)")
    parser.add_argument("--seed", type=Path, help="the seed run (default: SCRATCH/seed, made when absent)")
    parser.add_argument("--cache-dir", type=Path, help="synthetic cohort cache for the seed run and resume")
    parser.add_argument("--only", nargs="+", choices=sorted(SIZES) + ["recovery"], default=sorted(SIZES),
                        help="recovery alone re-reads bench/recovery.json (run scripts/bench_recovery.py first)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "scaling.json")
    args = parser.parse_args(argv)
    cache = args.cache_dir or Path(os.environ.get("MEDOPENCLAW_CACHE", Path.home() / ".cache" / "medopenclaw"))
    kinds = [kind for kind in args.only if kind in SIZES]
    seed = seed_run(args.seed or args.scratch / "seed", cache) if kinds else None
    document = json.loads(args.out.read_text()) if args.out.exists() else {}
    document.update({  # the load each command ran under is kept with it (--only re-measures some)
        "benchmark": "growth exponents of CPU time (wait4, above the fixed cost) against input size",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    })
    for kind in kinds:
        start = [round(value, 2) for value in os.getloadavg()]
        document.setdefault("commands", {})[kind] = {
            **growth(kind, seed, args.scratch, cache, SIZES[kind]),
            "load_average": {"start": start, "end": [round(value, 2) for value in os.getloadavg()]}}
    document["recovery"] = recovery_growth(ROOT / "bench" / "recovery.json")
    args.out.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(json.dumps({kind: value["exponent_cpu"] for kind, value in document.get("commands", {}).items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

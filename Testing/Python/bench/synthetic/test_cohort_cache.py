"""The cohort cache (bench/cohort_cache.py): a second process that wants a package another process is generating
waits for it and reuses it instead of generating it again; ``bench cohort --prune`` removes the cohorts of other
fingerprints and keeps the current one's; the test suite's cohorts stay out of the user's home."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from filelock import FileLock

from MedOpenClawLib.bench import cohort_cache
from MedOpenClawLib.bench.cohort_cache import _generate, cache_root, cohort_fingerprint, folder_bytes
from MedOpenClawLib.bench.run_launch import module_packages
from MedOpenClawLib.bench.synthetic import pool
from MedOpenClawLib.bench.synthetic.cohort import CohortConfig
from MedOpenClawLib.cli import EXIT_USAGE, build_parser, main

REPO = Path(__file__).resolve().parents[4]


def test_a_second_process_waits_for_the_generation_and_reuses_it(tmp_path):
    """This process makes the package on 4 mm grids, not the demo's 2 mm (0.5 s of CPU against 2.3): what the second
    process reuses is under test, not what the package holds."""
    config = replace(CohortConfig.for_size("demo", seed=0, cases=1), mri_spacing_mm=4)
    root = tmp_path / f"synthetic-{cohort_fingerprint()}-demo-seed0-n1"
    root.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "MedOpenClaw"), str(REPO / "MedCopilot")])}
    with FileLock(str(root / ".ucsf-pdgm.lock")):  # this process is the first: it generates under the lock
        second = subprocess.Popen(
            [sys.executable, "-m", "MedOpenClawLib.cli", "bench", "cohort", "--cache", "--cache-dir", str(tmp_path),
             "--modules", "ucsf-pdgm", "--cases", "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        waiting = second.stderr.readline()
        assert waiting == "cohort ucsf-pdgm 1/1: waiting for another process generating it\n"
        assert second.poll() is None
        _generate("ucsf-pdgm", config, root)
        manifest = (root / "cases" / "ucsf-pdgm" / "manifest.json").stat()
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    assert json.loads(out)["packages"]["ucsf-pdgm"] == str(root / "cases" / "ucsf-pdgm")
    assert "generating" not in err
    assert (root / "cases" / "ucsf-pdgm" / "manifest.json").stat().st_mtime_ns == manifest.st_mtime_ns


def test_prune_keeps_the_current_fingerprint(tmp_path, capsys):
    current = tmp_path / f"synthetic-{cohort_fingerprint()}-demo-seed0-n6" / "cases" / "nsclc"
    old = tmp_path / "synthetic-0123456789ab-demo-seed0-n6" / "cases" / "nsclc"
    for folder in (current, old):
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text("{}")
    (old / "image.bin").write_bytes(bytes(1000))
    os.link(old / "image.bin", old / "linked.bin")  # packages hard-link their files: counted once
    (tmp_path / "notes.txt").write_text("not a cohort")
    assert folder_bytes(old.parents[1]) == 1002
    assert main(["bench", "cohort", "--prune", "--cache-dir", str(tmp_path)]) == 0
    pruned = json.loads(capsys.readouterr().out)
    assert pruned == {"cache": str(tmp_path.resolve()), "kept_fingerprint": cohort_fingerprint(),
                      "removed": ["synthetic-0123456789ab-demo-seed0-n6"], "freed_bytes": 1002}
    assert current.is_dir() and not old.parents[1].exists() and (tmp_path / "notes.txt").is_file()


def test_the_cache_follows_the_environment_and_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEDOPENCLAW_CACHE", "relative-cache")
    assert cache_root() == tmp_path.resolve() / "relative-cache"
    assert cache_root("given") == tmp_path.resolve() / "given"



def test_plain_pytest_caches_the_cohort_in_the_build_tree_unless_told_otherwise(tmp_path, monkeypatch):
    """The suite's own conftest hook, loaded from its file, on an environment without and with MEDOPENCLAW_CACHE."""
    spec = importlib.util.spec_from_file_location("suite_conftest", REPO / "Testing" / "Python" / "conftest.py")
    suite_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite_conftest)
    for name in ("MEDOPENCLAW_CACHE", "MEDOPENCLAW_COHORT_CASES"):
        monkeypatch.delenv(name, raising=False)  # restored afterwards, whatever the hook set
    suite_conftest.pytest_configure(None)
    assert os.environ["MEDOPENCLAW_CACHE"] == str(REPO / "build" / "cohort-cache")
    assert os.environ["MEDOPENCLAW_COHORT_CASES"] == "2"  # as ctest's environment has it
    monkeypatch.setenv("MEDOPENCLAW_CACHE", str(tmp_path / "mine"))
    monkeypatch.setenv("MEDOPENCLAW_COHORT_CASES", "5")
    suite_conftest.pytest_configure(None)
    assert os.environ["MEDOPENCLAW_CACHE"] == str(tmp_path / "mine")
    assert os.environ["MEDOPENCLAW_COHORT_CASES"] == "5"


def _stub_generation(monkeypatch) -> list[tuple[str, int]]:
    """The generator replaced by one that writes an empty package and notes (module, cases): the cache's choice
    of cohort is under test, not the generator."""
    made = []

    def generate(module, config, root):
        made.append((module, config.cases))
        (root / "cases" / module).mkdir(parents=True)
        (root / "cases" / module / "manifest.json").write_text("{}")

    monkeypatch.setattr(cohort_cache, "_generate", generate)
    return made


def test_the_case_count_comes_from_the_flag_else_the_setting_else_the_size(tmp_path, monkeypatch, capsys):
    made = _stub_generation(monkeypatch)
    prefix = f"synthetic-{cohort_fingerprint()}-demo-seed0"

    def cached(*flags):
        assert main(["bench", "cohort", "--cache", "--modules", "lumiere", "--cache-dir", str(tmp_path), *flags]) == 0
        return Path(json.loads(capsys.readouterr().out)["packages"]["lumiere"]).parents[1].name

    monkeypatch.delenv("MEDOPENCLAW_COHORT_CASES", raising=False)
    assert cached() == f"{prefix}-n6"
    monkeypatch.setenv("MEDOPENCLAW_COHORT_CASES", " 3 ")
    assert cached() == f"{prefix}-n3"
    assert cached("--cases", "4") == f"{prefix}-n4"
    assert made == [("lumiere", 6), ("lumiere", 3), ("lumiere", 4)]
    # bench run's flag, parsed as a user types it, chooses the same way
    run = build_parser(["bench", "run"]).parse_args(["bench", "run", "--module", "lumiere", "--agent", "oracle",
                                                    "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path),
                                                    "--cohort-cases", "5"])
    assert module_packages(run, ["lumiere"])["lumiere"].parents[1].name == f"{prefix}-n5"
    run.cohort_cases = None
    assert module_packages(run, ["lumiere"])["lumiere"].parents[1].name == f"{prefix}-n3"
    assert made[3:] == [("lumiere", 5)]


@pytest.mark.parametrize("value", ["0", "-1", "two", "2.5", "1e3", "³"])
def test_a_case_count_setting_that_is_not_a_count_is_refused_before_anything_is_made(value, tmp_path, monkeypatch,
                                                                                       capsys):
    made = _stub_generation(monkeypatch)
    monkeypatch.setenv("MEDOPENCLAW_COHORT_CASES", value)
    assert main(["bench", "cohort", "--cache", "--modules", "lumiere", "--cache-dir", str(tmp_path)]) == EXIT_USAGE
    assert capsys.readouterr().err == ("error: MEDOPENCLAW_COHORT_CASES must be a whole number of cases, 1 or more "
                                       f"(got {value!r})\n")
    assert made == [] and list(tmp_path.iterdir()) == []


def test_several_missing_modules_are_generated_at_once_each_once(tmp_path, monkeypatch, capsys):
    """synthetic_packages (bench run --module all, bench cohort --cache): the cached module is kept, the missing
    ones are generated concurrently (one thread each, their cases in one shared pool), one line per module."""
    made, overlap = [], threading.Barrier(2, timeout=30)

    def generate(module, config, root):  # stands in for the generator: the orchestration is under test
        overlap.wait()  # both missing modules are in progress at the same time
        assert pool._SHARED_POOL is not None
        made.append(module)
        (root / "cases" / module).mkdir(parents=True)
        (root / "cases" / module / "manifest.json").write_text("{}")

    monkeypatch.setattr(cohort_cache, "_generate", generate)
    monkeypatch.delenv("MEDOPENCLAW_COHORT_CASES", raising=False)  # the demo size's six (the suite sets two)
    kept = tmp_path / f"synthetic-{cohort_fingerprint()}-demo-seed0-n6" / "cases" / "bracs"
    kept.mkdir(parents=True)
    (kept / "manifest.json").write_text("{}")
    packages = cohort_cache.synthetic_packages(["bracs", "lumiere", "nsclc"], cache_dir=tmp_path)
    assert packages == {module: kept.parent / module for module in ("bracs", "lumiere", "nsclc")}
    assert sorted(made) == ["lumiere", "nsclc"] and pool._SHARED_POOL is None
    lines = capsys.readouterr().err.splitlines()
    assert sorted(line.split(" (")[0] for line in lines[:2]) == ["cohort lumiere 2/3: 6 cases",
                                                                 "cohort nsclc 3/3: 6 cases"]
    assert lines[2].startswith("cohort: generating 6 cases of 2 modules at once") and lines[2].endswith(": done")


def test_a_module_that_fails_raises_once_the_others_are_done(tmp_path, monkeypatch):
    def generate(module, config, root):
        if module == "lumiere":
            raise RuntimeError("lumiere generator failed")
        time.sleep(0.2)
        (root / "cases" / module).mkdir(parents=True)
        (root / "cases" / module / "manifest.json").write_text("{}")

    monkeypatch.setattr(cohort_cache, "_generate", generate)
    with pytest.raises(RuntimeError, match="lumiere generator failed"):
        cohort_cache.synthetic_packages(["lumiere", "nsclc"], cache_dir=tmp_path)
    assert (cohort_cache._cohort(0, None, tmp_path, "demo")[1] / "cases" / "nsclc" / "manifest.json").is_file()

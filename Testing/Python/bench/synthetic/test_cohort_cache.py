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
from pathlib import Path

import pytest
from filelock import FileLock

from MedOpenClawLib.bench import cohort_cache
from MedOpenClawLib.bench.cohort_cache import _generate, cache_root, cohort_fingerprint, folder_bytes
from MedOpenClawLib.bench.synthetic import pool
from MedOpenClawLib.bench.synthetic.cohort import CohortConfig
from MedOpenClawLib.cli import main

REPO = Path(__file__).resolve().parents[4]


def test_a_second_process_waits_for_the_generation_and_reuses_it(tmp_path):
    config = CohortConfig.for_size("demo", seed=0, cases=1)
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
    monkeypatch.delenv("MEDOPENCLAW_CACHE", raising=False)  # restored afterwards, whatever the hook set
    suite_conftest.pytest_configure(None)
    assert os.environ["MEDOPENCLAW_CACHE"] == str(REPO / "build" / "cohort-cache")
    monkeypatch.setenv("MEDOPENCLAW_CACHE", str(tmp_path / "mine"))
    suite_conftest.pytest_configure(None)
    assert os.environ["MEDOPENCLAW_CACHE"] == str(tmp_path / "mine")


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

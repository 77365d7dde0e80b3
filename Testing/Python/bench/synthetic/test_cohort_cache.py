"""The cohort cache (bench/cohort_cache.py): a second process that wants a package another process is generating
waits for it and reuses it instead of generating it again; ``bench cohort --prune`` removes the cohorts of other
fingerprints and keeps the current one's; the test suite's cohorts stay out of the user's home."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from filelock import FileLock

from MedOpenClawLib.bench.cohort_cache import _generate, cache_root, cohort_fingerprint, folder_bytes
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
        _generate("ucsf-pdgm", config, root, "")
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

"""``--slicer`` workers end as a whole process tree (issue: real Slicer processes left behind), against the
launcher double of ``slicer_launcher_double`` that forks the application as ctkAppLauncher does: nothing survives
a normal run, a worker that stops answering, a failing start-up, or a double Ctrl-C at the runner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from MedOpenClawLib.worker.client import WorkerProcess, slicer_command
from MedOpenClawLib.worker.protocol import WorkerFault, WorkerHung

DOUBLES = Path(__file__).resolve().parents[1]  # Testing/Python: the shared doubles
ROOT = DOUBLES.parents[1]
pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")


@pytest.fixture()
def launcher(tmp_path, monkeypatch):
    """An executable ``Slicer`` (the launcher double) and the folder where its processes record their pids."""
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("MEDOPENCLAW_DOUBLE_PIDS", str(pids))
    path = tmp_path / "Slicer"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{DOUBLES / "slicer_launcher_double.py"}" "$@"\n')
    path.chmod(0o755)
    return path, pids


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for a parent (an orphan's parent may be a container's init that never
    reaps)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def survivors(pids: Path, wait_s: float = 5.0) -> list[str]:
    deadline = time.monotonic() + wait_s
    while True:
        left = [entry.name for entry in pids.iterdir() if alive(int(entry.read_text()))]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def roles(pids: Path) -> list[str]:
    return sorted(entry.name.split("-")[0] for entry in pids.iterdir())


def test_a_normal_run_leaves_no_slicer_process(launcher, tmp_path, monkeypatch):
    path, pids = launcher
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "MedOpenClaw"), os.environ.get("PYTHONPATH", "")]))
    worker = WorkerProcess(tmp_path / "w", slicer=str(path), startup_timeout_s=120).start()
    assert worker.ping()["pid"] != worker.pid  # the worker is the application, a child of the launcher
    worker.close()
    assert roles(pids) == ["app", "launcher"] and survivors(pids) == []
    assert worker.process.returncode == 0  # the script ended the application, which ended the launcher
    # Slicer gets a clean environment: the runner's PYTHONPATH (its venv, its checkout) never reaches Slicer's Python
    assert "launcher: inherited PYTHONPATH=''" in (tmp_path / "w" / "worker.log").read_text()


def test_a_worker_that_stops_answering_is_killed_with_its_launcher(launcher, tmp_path):
    path, pids = launcher
    worker = WorkerProcess(tmp_path / "w", slicer=str(path), startup_timeout_s=120).start()
    os.kill(worker.ping()["pid"], signal.SIGSTOP)  # the application hangs (the launcher keeps waiting for it)
    with pytest.raises(WorkerHung):
        worker.request("ping", timeout_s=0.5)
    assert survivors(pids) == []


def test_a_script_failing_at_start_up_ends_slicer(launcher, tmp_path):
    """run_bench.py raises (here: the ready file cannot be written); the application must not stay up windowless."""
    path, pids = launcher
    worker = WorkerProcess(tmp_path / "w", startup_timeout_s=60,
                           command=lambda ready: slicer_command(str(path), str(tmp_path / "absent" / "ready.json")))
    started = time.monotonic()
    with pytest.raises(WorkerFault, match="exited during start-up with code 1"):
        worker.start()
    assert time.monotonic() - started < 60, "the failure must end Slicer, not wait for the start-up timeout"
    worker.kill()
    assert survivors(pids) == [] and "FileNotFoundError" in (tmp_path / "w" / "worker.log").read_text()


def test_a_start_up_timeout_kills_the_tree(launcher, tmp_path, monkeypatch):
    path, pids = launcher
    monkeypatch.setenv("MEDOPENCLAW_WORKER_TOKEN", "")  # ignored: the worker gets its own token
    hanging = tmp_path / "hang.py"
    hanging.write_text("import time\nwhile True:\n    time.sleep(1)\n")  # a script that never reports ready
    worker = WorkerProcess(tmp_path / "w", startup_timeout_s=3,
                           command=lambda ready: [str(path), "--no-main-window", "--python-script", str(hanging)])
    with pytest.raises(WorkerFault, match="not ready within"):
        worker.start()
    assert roles(pids) == ["app", "launcher"] and survivors(pids) == []


def test_an_abort_before_the_process_exists_launches_nothing_or_kills_what_it_launched(tmp_path):
    """A session closed while its viewer's boot had not launched the process yet (another thread aborts it): start()
    launches nothing, or kills at once what it was launching, instead of booting a viewer for nobody."""
    launched = []
    worker = WorkerProcess(tmp_path / "before", command=lambda ready: launched.append(ready) or [sys.executable])
    worker.abort()
    with pytest.raises(WorkerFault, match="aborted"):
        worker.start()
    assert launched == [] and worker.process is None

    def aborted_while_launching(ready: str) -> list[str]:
        during.abort()  # no process to kill yet
        return [sys.executable, "-c", "import time; time.sleep(60)"]

    during = WorkerProcess(tmp_path / "during", command=aborted_while_launching)
    with pytest.raises(WorkerFault, match="aborted"):
        during.start()
    assert during.process.returncode == -signal.SIGKILL


def test_a_double_ctrl_c_at_the_runner_leaves_no_slicer_process(launcher, tmp_path):
    # the runner's cohort cache (filelock): not in a Slicer release's Python, where the other tests here run too
    from MedOpenClawLib.bench.cohort_cache import synthetic_cases

    path, pids = launcher
    out, log = tmp_path / "run", tmp_path / "runner.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "MedOpenClaw"), str(ROOT / "MedCopilot")])}
    with log.open("wb") as sink:
        runner = subprocess.Popen(
            [sys.executable, "-m", "MedOpenClawLib.cli", "bench", "run", "--module", "lumiere", "--agent", "oracle",
             "--cases", str(synthetic_cases("lumiere")), "--limit", "3", "--workers", "1", "--slicer", str(path),
             "--out", str(out)], stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("episodes/*/trace-1.jsonl")):  # the first episode runs in the Slicer double
            assert runner.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        runner.send_signal(signal.SIGINT)
        time.sleep(0.3)
        runner.send_signal(signal.SIGINT)
        runner.wait(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    output = log.read_text()
    assert "stopping now" in output, output[-3000:]
    assert "app" in roles(pids) and survivors(pids) == [], output[-3000:]
    assert json.loads((out / "summary.json").read_text())["interrupted"]


def test_pathology_under_slicer_runs_on_the_worker_that_reads_slides(launcher, tmp_path, capsys):
    """3D Slicer's Python has no openslide/tiffslide: with ``--slicer`` a pathology episode runs headless and is
    scored, and no Slicer is started for it."""
    from MedOpenClawLib.bench.modules import get
    from MedOpenClawLib.bench.package import prepare
    from MedOpenClawLib.bench.synthetic.cohort import CohortConfig, write_cohort
    from MedOpenClawLib.cli import main

    path, pids = launcher
    write_cohort(tmp_path / "raw", CohortConfig(seed=7, cases=1, slide_size=(1024, 768), workers=1),
                 modules=["bracs"])
    prepare(get("bracs"), tmp_path / "raw" / get("bracs").dataset_dir, tmp_path / "cases")
    code = main(["bench", "run", "--module", "bracs", "--agent", "oracle", "--cases", str(tmp_path / "cases"),
                 "--slicer", str(path), "--out", str(tmp_path / "run")])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and summary["invalid"] == 0 and summary["scored"] == 1, summary
    assert roles(pids) == []


def test_slicer_gets_no_python_configuration_of_the_caller():
    from MedOpenClawLib.worker.client import slicer_environment

    environ = {"PYTHONPATH": "/venv/src", "PYTHONHOME": "/usr", "PYTHONSTARTUP": "s.py", "VIRTUAL_ENV": "/venv",
               "PATH": "/usr/bin", "HOME": "/root", "MEDOPENCLAW_DOUBLE_PIDS": "/tmp/p"}
    assert slicer_environment(environ) == {"PATH": "/usr/bin", "HOME": "/root", "MEDOPENCLAW_DOUBLE_PIDS": "/tmp/p"}


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, {"QT_QPA_PLATFORM": "offscreen"}),
    ({"DISPLAY": ":0"}, {}),
    ({"WAYLAND_DISPLAY": "wayland-0"}, {}),
    ({"QT_QPA_PLATFORM": "xcb"}, {}),
])
def test_display_less_linux_nodes_start_slicer_offscreen(environ, expected):
    from MedOpenClawLib.worker.client import display_environment

    assert display_environment(environ) == (expected if sys.platform.startswith("linux") else {})

"""A stand-in for the 3D Slicer executable as ``bench run --slicer`` starts it: a launcher that forks the application.

``Slicer`` is ctkAppLauncher (commontk/AppLauncher Base/ctkAppLauncher.cpp): ``ctkAppLauncherInternal::runProcess``
starts ``SlicerApp-real`` with ``QProcess::start`` (a child in the launcher's process group), waits for it and exits
with its exit code; it installs no signal handler, so a SIGINT/SIGTERM/SIGKILL ends the launcher alone and the
application lives on. The application (``--app`` here) mirrors qSlicerCoreApplication with ``--no-main-window
--python-script FILE ARGS``: the script runs as ``__main__`` with ``sys.argv = [FILE, ARGS...]`` inside the
application (``slicer_app_double`` on slicer-core); a script that raises has its traceback printed and the
application keeps running its event loop, windowless, until ``slicer.util.exit`` (Base/QTCore/
qSlicerCoreApplication.cxx); ``--testing`` makes it exit after the script.

Like ctkAppLauncher with SlicerLauncherSettings.ini (``[PYTHONPATH]`` paths, prepended to an inherited
``PYTHONPATH``), the launcher puts the application's own Python paths first: here the doubles and this checkout's
``MedOpenClawLib`` (standing in for what Slicer bundles); the caller's ``PYTHONPATH`` is kept after them (and printed to
standard error, for the tests).
Packages that no Slicer release bundles (the slide readers) cannot be imported in the application double.
Every process records its pid in ``$MEDOPENCLAW_DOUBLE_PIDS`` (a folder), so tests can check that none survives.
Run as ``python slicer_launcher_double.py --no-main-window --python-script FILE ARGS...``.
"""

from __future__ import annotations

import importlib.abc
import os
import runpy
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

PIDS_ENV = "MEDOPENCLAW_DOUBLE_PIDS"


def record_pid(role: str) -> None:
    folder = os.environ.get(PIDS_ENV)
    if folder:
        Path(folder, f"{role}-{os.getpid()}").write_text(str(os.getpid()))


# the application's own Python paths (the launcher settings' [PYTHONPATH] of this stand-in)
APPLICATION_PATHS = (Path(__file__).resolve().parent, Path(__file__).resolve().parents[2] / "MedOpenClaw")


def launcher(argv: list[str]) -> int:
    for signum in (signal.SIGINT, signal.SIGTERM):  # a Qt application's default: die, tell no child
        signal.signal(signum, signal.SIG_DFL)
    record_pid("launcher")
    inherited = os.environ.get("PYTHONPATH", "")
    print(f"launcher: inherited PYTHONPATH={inherited!r}", file=sys.stderr, flush=True)  # for the tests' log
    paths = [str(path) for path in APPLICATION_PATHS] + ([inherited] if inherited else [])
    application = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--app", *argv],
                                   env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)})
    return application.wait()


# packages of this test environment that no 3D Slicer release bundles (their SuperBuild/External_python-*.cmake
# list none) and MedOpenClaw never installs into Slicer: the application double must not find them either
NOT_IN_SLICER = ("openslide", "tiffslide")


class _HideUnbundled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in NOT_IN_SLICER:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


class _Setter:
    """What ``slicer_app_double.install`` needs of pytest's monkeypatch, for a whole process."""

    @staticmethod
    def setattr(target, name, value, raising=True):
        setattr(target, name, value)


def application(argv: list[str]) -> int:
    record_pid("app")
    sys.meta_path.insert(0, _HideUnbundled())
    if "--python-script" not in argv:
        print("usage: Slicer [--no-main-window] [--testing] --python-script FILE ARGS...", file=sys.stderr)
        return 64
    index = argv.index("--python-script")
    options, script, arguments = argv[:index], argv[index + 1], argv[index + 2:]
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import slicer_app_double

    app = slicer_app_double.install(_Setter(), main_window="--no-main-window" not in options)
    app.commandOptions().testingEnabled = "--testing" in options
    sys.argv = [script, *arguments]
    sys.path.insert(0, str(Path(script).resolve().parent))  # ctkAbstractPythonManager::executeFile
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:  # PythonQt: sys.exit in a script ends the application
        return stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
    if app.exit_status is None and app.commandOptions().testingEnabled:
        app.exit_status = 0
    while app.exit_status is None:  # the windowless application's event loop
        time.sleep(0.2)
    return app.exit_status


if __name__ == "__main__":
    if sys.argv[1:2] == ["--app"]:
        sys.exit(application(sys.argv[2:]))
    sys.exit(launcher(sys.argv[1:]))

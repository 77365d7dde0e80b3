"""Benchmark worker inside the real 3D Slicer application.

Launched by ``medopenclaw bench run --slicer PATH`` as
``PATH --no-main-window --python-script .../MedOpenClawLib/worker/scripts/run_bench.py --port P --ready-file F
--parent-pid R`` (token in the MEDOPENCLAW_WORKER_TOKEN environment variable). It serves the same worker protocol
as the headless slicer-core worker, with the episode registries bound to this application's scene and slice
views; the scene is cleared before every episode. Slicer's WebServer and its /slicer/exec route are not involved.

The script ships inside the package (a wheel has no ``scripts/``) and imports the very package it lies in, the
runner's copy, without putting that package's parent folder (a checkout, or another Python's site-packages) on
Slicer's ``sys.path``.
"""

import importlib.util
import os
import sys
import traceback
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2]  # .../MedOpenClawLib


def load_package() -> None:
    """Import ``MedOpenClawLib`` from ``PACKAGE`` (not whatever copy Slicer's module paths would find first)."""
    loaded = sys.modules.get("MedOpenClawLib")
    if loaded is not None:
        if Path(loaded.__file__).resolve().parent != PACKAGE:
            raise ImportError(f"MedOpenClawLib is already loaded from {loaded.__file__}, not the runner's {PACKAGE}")
        return
    spec = importlib.util.spec_from_file_location(
        "MedOpenClawLib", PACKAGE / "__init__.py", submodule_search_locations=[str(PACKAGE)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["MedOpenClawLib"] = module
    spec.loader.exec_module(module)


def parse_arguments(argv: list[str]):
    import argparse

    parser = argparse.ArgumentParser(description="MedOpenClaw benchmark worker inside 3D Slicer")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--parent-pid", type=int, help="exit when this process (the runner) is gone")
    return parser.parse_args(argv)


def main() -> int:
    args = parse_arguments(sys.argv[1:])
    load_package()
    # the package is importable only now, from the runner's copy (load_package): these two imports wait for it
    from MedOpenClawLib.worker.lifecycle import exit_with_parent

    if args.parent_pid:  # first: whatever fails or hangs below, the runner's end also ends this Slicer
        exit_with_parent(args.parent_pid)
    from MedOpenClawLib.worker.service import WorkerService, serve_worker, worker_token  # after load_package too

    try:
        token = worker_token()
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    serve_worker(WorkerService(), token, args.port, args.ready_file)
    return 0


def run() -> int:
    """``main``'s exit status, 1 after any exception: Slicer started with ``--python-script`` prints a failing
    script's traceback and keeps running without a window (Base/QTCore/qSlicerCoreApplication.cxx), so the
    script itself must end the application."""
    try:
        return main()
    except SystemExit as stop:  # argparse's usage errors
        return stop.code if isinstance(stop.code, int) else 2
    except BaseException:
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    code = run()
    try:
        import slicer

        slicer.util.exit(code)
    except ImportError:
        sys.exit(code)
    except Exception:  # no application to ask: end the process
        traceback.print_exc()
        os._exit(code)

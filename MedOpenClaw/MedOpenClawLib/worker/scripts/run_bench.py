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
import sys
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


def main() -> int:
    import argparse

    load_package()
    from MedOpenClawLib import settings
    from MedOpenClawLib.worker.protocol import TOKEN_ENV
    from MedOpenClawLib.worker.service import WorkerService, serve_worker

    parser = argparse.ArgumentParser(description="MedOpenClaw benchmark worker inside 3D Slicer")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--parent-pid", type=int, help="exit when this process (the runner) is gone")
    args = parser.parse_args(sys.argv[1:])
    token = settings.value(TOKEN_ENV)
    if not token:
        print(f"{TOKEN_ENV} must be set", file=sys.stderr)
        return 2
    serve_worker(WorkerService(), token, args.port, args.ready_file, args.parent_pid)
    return 0


if __name__ == "__main__":
    code = main()
    try:
        import slicer

        slicer.util.exit(code)
    except (ImportError, AttributeError):
        sys.exit(code)

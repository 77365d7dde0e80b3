"""Benchmark worker inside the real 3D Slicer application.

Launched by ``medopenclaw bench run --slicer PATH`` as
``PATH --no-main-window --python-script scripts/run_bench.py --port P --ready-file F --parent-pid R`` (token in the
MEDOPENCLAW_WORKER_TOKEN environment variable). It serves the same worker protocol as the headless
slicer-core worker, with the episode registries bound to this application's scene and slice views; the
scene is cleared before every episode. Slicer's WebServer and its /slicer/exec route are not involved.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "MedOpenClaw"))

from MedOpenClawLib.bench.worker import TOKEN_ENV, WorkerService, serve_worker  # noqa: E402


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description="MedOpenClaw benchmark worker inside 3D Slicer")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--parent-pid", type=int, help="exit when this process (the runner) is gone")
    args = parser.parse_args(sys.argv[1:])
    token = os.environ.get(TOKEN_ENV)
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

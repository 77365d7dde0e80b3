"""``medopenclaw`` (the real CLI: ``serve``, ``mcp``) whose supervised viewer is ``crashing_worker.py``.

Only tests run this file: it swaps the supervisor's launch command, nothing else.
"""

from __future__ import annotations

import sys

import crashing_worker

from MedOpenClawLib import cli
from MedOpenClawLib.server import supervisor

if __name__ == "__main__":
    supervisor.worker_command = crashing_worker.command
    sys.exit(cli.main())

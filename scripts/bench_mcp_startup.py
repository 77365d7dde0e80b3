"""Start-up of the stdio MCP server as a client sees it: ms from spawning ``medopenclaw mcp`` to its answers to
``initialize`` and ``tools/list`` (target: within 2 s), the server's CPU time by then (what a loaded machine does
not inflate), and the first tool call's answer (it waits for the viewer booting behind). Measured with plain pipes
and with the official MCP SDK's stdio client; plus where the CPU time goes (each part imported in a fresh
interpreter) and the load average around every run, since the machine may be shared.

Writes bench/mcp_startup.json.

    python scripts/bench_mcp_startup.py [--runs 7] [--sdk-runs 3] [--out bench/mcp_startup.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import nibabel as nib
import numpy as np
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from MedOpenClawLib.core.sinks import write_json

REPO = Path(__file__).resolve().parents[1]
TARGET_MS = 2000.0
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "MedOpenClaw"), str(REPO / "MedCopilot")]),
       "QT_QPA_PLATFORM": "offscreen"}
MESSAGES = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ping", "arguments": {}}},
]
# what the server imports before it can answer, each measured alone in a fresh interpreter (CPU ms)
IMPORT_PARTS = {
    "interpreter": "pass",
    "sdk_public_names": "import mcp.server.lowlevel, mcp.server.stdio, mcp.shared.exceptions, mcp_types",
    "our_modules": "import MedOpenClawLib.cli, MedOpenClawLib.server.mcp_commands, MedOpenClawLib.server.sessions, "
                   "MedOpenClawLib.server.rest, MedOpenClawLib.apps",
    "our_server_with_sdk": "import MedOpenClawLib.cli, MedOpenClawLib.server.mcp_commands, "
                           "MedOpenClawLib.server.mcp, MedOpenClawLib.server.mcp_transport",
}


def summary(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered), 1), "max_ms": round(ordered[-1], 1), "n": len(ordered)}


def cpu_ms(pid: int) -> float:
    """CPU time (user + system) the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def command(data_root: str) -> list[str]:
    return [sys.executable, "-m", "MedOpenClawLib.cli", "mcp", "--data-root", data_root]


def pipe_run(data_root: str) -> dict:
    """One start with plain pipes, all four messages written at once as a client may."""
    started = time.perf_counter()
    process = subprocess.Popen(command(data_root), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, env=ENV)
    process.stdin.write(b"".join(json.dumps(message).encode() + b"\n" for message in MESSAGES))
    process.stdin.flush()
    run = {"load_1m_before": round(os.getloadavg()[0], 2)}
    for key, expected in (("initialize_ms", 1), ("tools_list_ms", 2), ("first_call_ms", 3)):
        answer = json.loads(process.stdout.readline())
        assert answer.get("id") == expected and "result" in answer, answer
        run[key] = (time.perf_counter() - started) * 1000.0
        if expected == 2:
            run["tools_list_cpu_ms"] = cpu_ms(process.pid)
    process.stdin.close()
    process.wait(timeout=120)
    run["load_1m_after"] = round(os.getloadavg()[0], 2)
    return run


def sdk_run(data_root: str) -> dict:
    """One start driven by the official SDK's stdio client (spawn, initialize, list_tools)."""
    parts = command(data_root)
    parameters = StdioServerParameters(command=parts[0], args=parts[1:], env=ENV)
    run: dict = {"load_1m_before": round(os.getloadavg()[0], 2)}

    async def main() -> None:
        started = time.perf_counter()
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            run["initialize_ms"] = (time.perf_counter() - started) * 1000.0
            tools = (await session.list_tools()).tools
            run["tools_list_ms"] = (time.perf_counter() - started) * 1000.0
            run["tools"] = len(tools)

    anyio.run(main)
    run["load_1m_after"] = round(os.getloadavg()[0], 2)
    return run


def import_cpu_ms(statement: str, runs: int) -> dict:
    probe = (f"import os, time\n{statement}\nt = os.times()\nprint((t.user + t.system) * 1000)")
    samples = [float(subprocess.run([sys.executable, "-c", probe], env=ENV, capture_output=True, text=True,
                                    check=True).stdout) for _ in range(runs)]
    return summary(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sdk-runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "mcp_startup.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        volume = (np.indices((32, 32, 16)).sum(axis=0) % 50).astype(np.int16)
        nib.save(nib.Nifti1Image(volume, np.eye(4)), str(Path(folder) / "case.nii.gz"))
        pipes = [pipe_run(folder) for _ in range(args.runs)]
        sdk = [sdk_run(folder) for _ in range(args.sdk_runs)]
    report = {
        "pipes": {key: summary([run[key] for run in pipes]) for key in
                  ("initialize_ms", "tools_list_ms", "tools_list_cpu_ms", "first_call_ms")},
        "sdk_client": {key: summary([run[key] for run in sdk]) for key in ("initialize_ms", "tools_list_ms")},
        "import_cpu_ms": {name: import_cpu_ms(statement, 3) for name, statement in IMPORT_PARTS.items()},
        "runs": {"pipes": [{key: round(value, 1) for key, value in run.items()} for run in pipes],
                 "sdk_client": [{key: round(value, 1) for key, value in run.items()} for run in sdk]},
    }
    quiet = [run for run in pipes if max(run["load_1m_before"], run["load_1m_after"]) < 1.0]
    report["meets_targets"] = {
        "tools_list_within_2_s_cpu": report["pipes"]["tools_list_cpu_ms"]["max_ms"] <= TARGET_MS,
        "tools_list_within_2_s_wall_p50": report["pipes"]["tools_list_ms"]["p50_ms"] <= TARGET_MS,
        "tools_list_within_2_s_wall_when_load_below_1": (all(run["tools_list_ms"] <= TARGET_MS for run in quiet)
                                                         if quiet else None),
    }
    report["machine"] = {"python": platform.python_version(), "cpu_count": os.cpu_count(),
                         "load_average_1m_end": round(os.getloadavg()[0], 2)}
    write_json(args.out, report, indent=2)
    print(json.dumps({key: report[key] for key in ("pipes", "sdk_client", "import_cpu_ms", "meets_targets")},
                     indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

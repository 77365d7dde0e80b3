"""MedCopilot latency inside 3D Slicer's event loop: from ``send`` to the model's answer shown, per model call.

The application double's event loop holds the GIL while Qt waits, as PythonQt does (``slicer_app_double.
Application.run_event_loop``); the panel's ``QTimer`` polls the call every 50 ms. Compared: the model call in a
thread (the design before the worker process) and in MedCopilotLib.worker's child process, each under that loop
and under PySide6's own loop (which releases the GIL while it waits: what the PySide6 tests saw). The model server
is a fake OpenAI-compatible server in a process of its own (a real server's GIL is not ours), answering at once.

Writes bench/copilot_latency.json.

    python scripts/bench_copilot_latency.py [--calls N] [--out bench/copilot_latency.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Testing" / "Python"))  # the doubles and the fake model server
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from agents_fakes import FakeModelServer, Scripted, openai_reply, toy_registry  # noqa: E402

from MedCopilotLib.panel import POLL_INTERVAL_MS  # noqa: E402
from MedCopilotLib.session import THINKING, CopilotSession  # noqa: E402
from MedCopilotLib.worker import ModelCall, ModelWorker  # noqa: E402
from MedOpenClawLib.core.audit import AuditTrace  # noqa: E402
from MedOpenClawLib.gui.qt_compat import application, qt  # noqa: E402
from MedOpenClawLib.providers import OpenAIChatProvider, ProviderConfig, RetryPolicy  # noqa: E402


class ThreadWorker:
    """The design this benchmark retires (MedCopilotLib/worker.py before #37): the call on a daemon thread, its
    outcome on a queue that the panel's timer polls."""

    def __init__(self):
        self._outcomes: queue.Queue = queue.Queue()
        self._callbacks = None

    @property
    def busy(self) -> bool:
        return self._callbacks is not None

    def submit(self, call: ModelCall, on_done, on_error) -> None:
        self._callbacks = (on_done, on_error)

        def run() -> None:
            try:
                self._outcomes.put((0, call.model.complete(call.messages, call.tools)))
            except Exception as error:
                self._outcomes.put((1, error))

        threading.Thread(target=run, daemon=True).start()

    def poll(self) -> bool:
        try:
            failed, value = self._outcomes.get_nowait()
        except queue.Empty:
            return False
        callbacks, self._callbacks = self._callbacks, None
        callbacks[failed](value)
        return True

    def cancel(self) -> None:
        self._callbacks = None

    def close(self) -> None:
        pass


def serve(url_file: str) -> None:
    """The fake model server's own process: answers every request at once, until its standard input closes."""
    with FakeModelServer([], respond=lambda body: Scripted(openai_reply("Done.")), keep_requests=False) as server:
        Path(url_file).write_text(server.url)
        sys.stdin.read()


def pyside_event_loop(until, timeout_s: float) -> bool:
    """PySide6's loop: ``processEvents(WaitForMoreEvents)`` releases the GIL while Qt waits for the next event."""
    deadline = time.monotonic() + timeout_s
    while not until():
        if time.monotonic() > deadline:
            return False
        application().processEvents(qt.QEventLoop.WaitForMoreEvents)
    return True


def measure(session: CopilotSession, run_loop, calls: int) -> list[float]:
    timer = qt.QTimer()
    timer.setInterval(POLL_INTERVAL_MS)
    timer.timeout.connect(session.poll)  # what CopilotPanel does
    timer.start()
    latencies = []
    for index in range(calls + 1):
        started = time.perf_counter()
        session.send(f"question {index}")
        if not run_loop(lambda: session.state != THINKING, 60.0):
            raise RuntimeError("no answer within 60 s")
        if index:  # the first call starts the model process: reported apart
            latencies.append(time.perf_counter() - started)
    timer.stop()
    return latencies


def summary(seconds: list[float]) -> dict:
    ms = sorted(value * 1000 for value in seconds)
    return {"p50_ms": round(statistics.median(ms), 1), "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 1),
            "max_ms": round(ms[-1], 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "copilot_latency.json")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    import slicer_app_double  # slicer-core: only for the measurement, not for --serve

    application()
    app = slicer_app_double.Application(main_window=False)
    loops = {"pythonqt (GIL held while idle)":
             lambda until, timeout_s: app.run_event_loop(until, timeout_s, POLL_INTERVAL_MS),
             "pyside6 (GIL released while idle)": pyside_event_loop}
    with tempfile.TemporaryDirectory() as folder:
        url_file = Path(folder, "url")
        server = subprocess.Popen([sys.executable, __file__, "--serve", str(url_file)], stdin=subprocess.PIPE)
        while not url_file.exists() or not url_file.read_text():
            time.sleep(0.05)
        config = ProviderConfig(kind="openai", model="fake-vlm", base_url=url_file.read_text(), api_key="none",
                                retry=RetryPolicy(max_retries=0), timeout_s=30)
        registry = toy_registry(trace=AuditTrace(Path(folder, "trace.jsonl")))
        provider = OpenAIChatProvider(config)
        tools = [action.describe() for action in registry.actions()]
        direct = []
        for _ in range(args.calls):
            started = time.perf_counter()
            provider.complete(CopilotSession(registry, provider, worker=ThreadWorker()).conversation.messages(),
                              tools)
            direct.append(time.perf_counter() - started)
        results = []
        for worker_name, make_worker in (("thread", ThreadWorker), ("process", ModelWorker)):
            for loop_name, run_loop in loops.items():
                session = CopilotSession(registry, OpenAIChatProvider(config), worker=make_worker())
                results.append({"worker": worker_name, "event_loop": loop_name,
                                **summary(measure(session, run_loop, args.calls))})
                session.close()
                print(json.dumps(results[-1]), flush=True)
        server.stdin.close()
        server.wait()
    app.close()
    report = {"benchmark": "copilot model-call latency, send to answer shown", "calls_per_cell": args.calls,
              "poll_interval_ms": POLL_INTERVAL_MS, "direct_call": summary(direct), "results": results,
              "python": platform.python_version(), "cpus": os.cpu_count(),
              "load_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

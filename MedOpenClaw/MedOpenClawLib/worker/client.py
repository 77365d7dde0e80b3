"""The client side: launching a worker process and talking to it."""

from __future__ import annotations

import itertools
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .lifecycle import GROUP_IN_SESSION, NEW_GROUP, stop_tree
from .protocol import (
    ATTACHMENTS,
    STREAM_BUFFER,
    TOKEN_ENV,
    WorkerError,
    WorkerFault,
    WorkerGarbled,
    WorkerHung,
    no_delay,
    read_answer,
    write_message,
)

# the Slicer batch script ships inside the package, so an installed wheel can run ``--slicer`` too
RUN_BENCH_SCRIPT = Path(__file__).resolve().parent / "scripts" / "run_bench.py"


def worker_arguments(ready_file: str, port: int) -> list[str]:
    """The arguments every worker launcher passes: where to listen, where to report readiness, whom to outlive."""
    return ["--port", str(port), "--ready-file", ready_file, "--parent-pid", str(os.getpid())]


def headless_command(ready_file: str, port: int = 0) -> list[str]:
    return [sys.executable, "-m", "MedOpenClawLib.worker", *worker_arguments(ready_file, port)]


def slicer_command(slicer: str, ready_file: str, port: int = 0) -> list[str]:
    """The real 3D Slicer, windowless, serving the registry through ``scripts/run_bench.py``."""
    return [slicer, "--no-main-window", "--python-script", str(RUN_BENCH_SCRIPT), *worker_arguments(ready_file, port)]


def slicer_environment(environ) -> dict[str, str]:
    """The caller's environment without what configures a Python (``PYTHON*``, ``VIRTUAL_ENV``): Slicer's launcher
    sets its own ``PYTHONPATH`` (SlicerLauncherSettings.ini) and only prepends it to an inherited one, so the
    runner's venv or checkout would otherwise reach Slicer's Python 3.12 (packages built for another Python, or a
    second copy of MedOpenClawLib)."""
    return {name: value for name, value in environ.items()
            if not name.startswith("PYTHON") and name != "VIRTUAL_ENV"}


def display_environment(environ) -> dict[str, str]:
    """``QT_QPA_PLATFORM=offscreen`` on a Linux node without a display: Slicer, even with ``--no-main-window``, is a
    Qt GUI application that aborts at start-up when the xcb platform finds no X server. Empty elsewhere, and when
    the user chose a platform (e.g. ``xcb`` under xvfb-run)."""
    if not sys.platform.startswith("linux") or environ.get("QT_QPA_PLATFORM"):
        return {}
    if environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"):
        return {}
    return {"QT_QPA_PLATFORM": "offscreen"}


class WorkerLink:
    """What every worker handle shares: liveness through its ``request`` (a local process, or a Ray actor)."""

    def request(self, op: str, timeout_s: float | None = None, **fields) -> dict:
        raise NotImplementedError

    @property
    def node(self) -> str:
        """Where the worker runs (recorded with each episode): this machine for a local process."""
        return socket.gethostname()

    def ping(self, timeout_s: float = 10.0) -> dict:
        return self.request("ping", timeout_s=timeout_s)

    def alive(self) -> bool:
        try:
            self.ping()
            return True
        except WorkerFault:
            return False


class WorkerProcess(WorkerLink):
    """Launches one worker and talks to it; any failure of the process or the link is a :class:`WorkerFault`."""

    def __init__(
        self,
        workdir: Path,
        slicer: str | None = None,
        startup_timeout_s: float = 120.0,
        call_timeout_s: float = 300.0,
        command: Callable[[str], list[str]] | None = None,
        own_session: bool = True,
    ):
        """``command(ready_file)`` overrides the launch command (default: headless, or ``slicer`` when given).
        ``own_session`` False keeps the worker in this process's session, in a process group of its own
        (:data:`~.lifecycle.GROUP_IN_SESSION`): a viewer serving this process's calls one at a time."""
        self.workdir = Path(workdir)
        self.own_session = own_session
        self.slicer = slicer
        self.command = command
        self.startup_timeout_s = startup_timeout_s
        self.call_timeout_s = call_timeout_s
        self.process: subprocess.Popen | None = None
        self._stream = None
        self._socket: socket.socket | None = None
        self._ids = itertools.count(1)
        self._aborted = False  # set by :meth:`abort`, which may come before the process exists

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self) -> WorkerProcess:
        if self._aborted:  # stopped before it started: a viewer's start-up (seconds of CPU) for nobody
            raise WorkerFault("worker start-up was aborted")
        self.workdir.mkdir(parents=True, exist_ok=True)
        ready = self.workdir / f"ready-{secrets.token_hex(4)}.json"
        if self.command is not None:
            command = self.command(str(ready))
        else:
            command = slicer_command(self.slicer, str(ready)) if self.slicer else headless_command(str(ready))
        token = secrets.token_urlsafe(24)
        inherited = slicer_environment(os.environ) if self.slicer else os.environ
        env = {**inherited, TOKEN_ENV: token, **display_environment(os.environ)}
        log = open(self.workdir / "worker.log", "ab")  # noqa: SIM115 - owned by the child process
        # a process group of its own (in a session of its own unless told otherwise): a Ctrl-C at the terminal
        # reaches the runner only, which decides what stops, and :meth:`kill` ends the whole tree
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                        **(NEW_GROUP if self.own_session else GROUP_IN_SESSION))
        log.close()
        if self._aborted:  # aborted while being launched, before there was a process to kill
            self.kill()
            raise WorkerFault("worker start-up was aborted")
        deadline = time.monotonic() + self.startup_timeout_s
        while not ready.exists():
            if self.process.poll() is not None:
                raise WorkerFault(
                    f"worker exited during start-up with code {self.process.returncode} "
                    f"(see {self.workdir / 'worker.log'})"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise WorkerFault(f"worker not ready within {self.startup_timeout_s:g} s")
            time.sleep(0.05)
        port = json.loads(ready.read_text())["port"]
        ready.unlink()
        try:
            self._socket = no_delay(socket.create_connection(("127.0.0.1", port), timeout=self.startup_timeout_s))
            self._stream = self._socket.makefile("rwb", buffering=STREAM_BUFFER)
            self._send({"op": "hello", "token": token})
            if not json.loads(self._stream.readline() or b"{}").get("ok"):
                raise WorkerFault("worker refused the handshake")
        except OSError as error:
            self.kill()
            raise WorkerFault(f"cannot connect to the worker: {error}") from error
        return self

    def _send(self, message: dict) -> None:
        write_message(self._stream, message)

    def request(self, op: str, timeout_s: float | None = None, relay: Callable[[bytes], object] | None = None,
                **fields) -> dict:
        """Send one request and wait for its answer; a refused request raises :class:`WorkerError`. The binary
        attachments of an answer (with those of the parts streamed ahead of it) come back under the result's
        ``attachments`` key, each as ``relay`` (if given) made it when it arrived."""
        if self._stream is None:
            raise WorkerFault("worker is not running")
        request_id = next(self._ids)
        try:
            self._socket.settimeout(timeout_s or self.call_timeout_s)
            self._send({"id": request_id, "op": op, **fields})
            received = read_answer(self._stream, request_id, relay)
        except TimeoutError:
            self.kill()
            raise WorkerHung(
                f"worker did not answer {op!r} within {timeout_s or self.call_timeout_s:g} s"
            ) from None
        except WorkerFault:  # out of step: nothing more it sends can be trusted
            self.kill()
            raise
        except OSError as error:
            self.kill()
            raise WorkerFault(f"lost the worker during {op!r}: {error}") from error
        if received is None:
            code = self.process.poll() if self.process else None
            self.kill()
            raise WorkerFault(f"worker closed the connection during {op!r} (exit code {code})")
        answer, attachments = received
        if not answer.get("ok"):
            error = answer.get("error") or {}
            raise WorkerError(error.get("code", "error"), error.get("message", ""))
        result = answer["result"]
        if attachments:
            if not isinstance(result, dict):
                self.kill()
                raise WorkerGarbled(f"protocol error: attachments to a {type(result).__name__} result")
            result[ATTACHMENTS] = attachments
        return result

    def kill(self) -> None:
        """Close the link and kill the worker's process tree (the real Slicer's launcher and application)."""
        for handle in (self._stream, self._socket):
            if handle is not None:
                try:
                    handle.close()
                except OSError:
                    pass
        self._stream = self._socket = None
        if self.process is not None:
            stop_tree(self.process)

    def abort(self) -> None:
        """Kill the worker's process tree, leaving the link alone: safe while another thread starts or uses this
        worker, which then sees it die (a :class:`WorkerFault`) and closes the link itself; a worker not started
        yet never starts."""
        self._aborted = True
        process = self.process
        if process is not None:
            stop_tree(process)

    def close(self) -> None:
        """Ask the worker to exit; kill it if it does not."""
        if self._stream is not None:
            try:
                self.request("shutdown", timeout_s=10.0)
            except (WorkerFault, WorkerError):
                pass
        if self.process is not None:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


class WorkerEnvironment:
    """An episode :class:`~MedOpenClawLib.bench.episode.Environment` whose registry lives in a worker process."""

    def __init__(self, worker: WorkerProcess):
        self.worker = worker
        self._tools: list[dict] = []

    def start(
        self,
        viewer: str,
        data_roots: list[str],
        track: str,
        max_rounds: int | None,
        trace_path: str,
        header: dict,
        save_images: bool = True,
        timeout_s: float | None = None,
    ) -> None:
        """Open an episode; ``timeout_s`` bounds it (default: the worker's call timeout)."""
        self._tools = self.worker.request(
            "start",
            timeout_s=timeout_s,
            viewer=viewer,
            data_roots=data_roots,
            track=track,
            max_rounds=max_rounds,
            trace_path=trace_path,
            header=header,
            save_images=save_images,
        )["tools"]

    def tools(self) -> list[dict]:
        return list(self._tools)

    def call(
        self,
        name: str,
        arguments: dict,
        actor: str = "agent",
        round_id: object = None,
        audit_extra: dict | None = None,
    ) -> dict:
        return self.worker.request(
            "call", name=name, arguments=arguments, actor=actor, round_id=round_id, audit_extra=audit_extra
        )

    def record_event(self, kind: str, payload: dict) -> None:
        self.worker.request("event", kind=kind, payload=payload)

    def observation(self) -> dict:
        return self.worker.request("observation")

    def end(self) -> None:
        self.worker.request("end")


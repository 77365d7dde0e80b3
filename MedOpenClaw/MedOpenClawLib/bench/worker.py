"""Benchmark workers: each is a viewer process (headless slicer-core, or the real 3D Slicer running
``scripts/run_bench.py``) serving one episode's action registry to the runner.

Keeping the viewer in its own process is what makes a batch robust: a crash or hang inside VTK/Slicer kills
one worker, not the run, and the runner retries the episode on a fresh one. Protocol: newline-delimited JSON
over a loopback TCP socket. The client first sends ``{"op": "hello", "token": T}`` (the token comes from the
``MEDOPENCLAW_WORKER_TOKEN`` environment variable, never argv), then requests ``{"id", "op", ...}`` answered
by ``{"id", "ok": true, "result"}`` or ``{"id", "ok": false, "error": {"code", "message"}}``.
Ops: ping, start (build a fresh registry for an episode), tools, call, event, end, shutdown, and for the crash
supervisor of ``serve``/``mcp`` (:mod:`..server.supervisor`): call with ``with_record`` (the audit record's
arguments, state and duration come back too) and restore (replay earlier action records onto the new registry).
"""

from __future__ import annotations

import argparse
import faulthandler
import hmac
import itertools
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..audit import AuditTrace
from ..registry import ActionRegistry
from ..replay import replay_records
from .environment import LocalEnvironment

TOKEN_ENV = "MEDOPENCLAW_WORKER_TOKEN"
# what a supervisor copies of the child's audit record into its own trace
SUPERVISED_RECORD_KEYS = ("action", "actor", "arguments", "state", "round", "extra")
RUN_BENCH_SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "run_bench.py"


_SLICER_APP = []  # the worker's one Slicer application, reused by every episode


def build_radiology(data_roots: list[str], track: str, trace: AuditTrace, max_rounds: int | None) -> ActionRegistry:
    """A registry over the worker's Slicer application with an emptied scene.

    One application per worker, cleared between episodes: creating the logic classes anew costs about a second
    per episode, and tearing down a headless application whose scene held markups crashes VTK (segfault).
    """
    from ..session import build_slicer_registry
    from ..viewer.application import SlicerApplication

    if not _SLICER_APP:
        _SLICER_APP.append(SlicerApplication.create())
    app = _SLICER_APP[0]
    app.scene.Clear(0)
    return build_slicer_registry(data_roots=data_roots, track=track, trace=trace, max_rounds=max_rounds, app=app)


def build_pathology(
    data_roots: list[str], track: str, trace: AuditTrace, max_rounds: int | None
) -> ActionRegistry:
    from ..pathology.actions import build_pathology_registry

    return build_pathology_registry(data_roots=data_roots, track=track, trace=trace, max_rounds=max_rounds)


# viewer kind -> registry builder; a request can only choose among these names
BUILDERS: dict[str, Callable[..., ActionRegistry]] = {
    "radiology": build_radiology,
    "pathology": build_pathology,
}


class WorkerError(Exception):
    """A request the worker refused (bad op, no episode started); the worker itself is healthy."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class WorkerFault(Exception):
    """The worker process crashed, hung or broke the protocol: discard it and retry on a fresh one."""


class WorkerHung(WorkerFault):
    """The worker did not answer within the call's timeout (it was killed)."""


# ----------------------------------------------------------------------------------------------- server side
class WorkerService:
    """The worker's state: at most one episode's registry at a time."""

    def __init__(
        self,
        builders: dict[str, Callable[..., ActionRegistry]] | None = None,
        before_episode: Callable[[], None] | None = None,
    ):
        self.builders = BUILDERS if builders is None else builders
        self.before_episode = before_episode  # e.g. clear the running Slicer app's scene
        self.env: LocalEnvironment | None = None
        self.stopping = False

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        if op == "ping":
            return {"pid": os.getpid(), "episode": self.env is not None}
        if op == "start":
            return self._start(request)
        if op == "shutdown":
            self.stopping = True
            return {}
        if self.env is None:
            raise WorkerError("no_episode", f"{op!r} needs a started episode")
        if op == "tools":
            return {"tools": self.env.tools()}
        if op == "call":
            result = self.env.call(
                request.get("name"),
                request.get("arguments"),  # as sent: ``[]`` must be refused, not called as ``{}``
                actor=request.get("actor", "agent"),
                round_id=request.get("round_id"),
                audit_extra=request.get("audit_extra"),
            )
            if not request.get("with_record"):
                return result
            record = self.env.registry.trace.records[-1]
            return {"result": result, "record": {key: record.get(key) for key in SUPERVISED_RECORD_KEYS}}
        if op == "restore":
            report = replay_records(self.env.registry, list(request.get("records") or []))
            return {"report": report.to_json(), "state": self.env.registry.state()}
        if op == "observation":
            return self._observation()
        if op == "event":
            self.env.record_event(str(request.get("kind")), request.get("payload") or {})
            return {}
        if op == "end":
            self.env = None
            return {}
        raise WorkerError("unknown_op", f"unknown op {op!r}")

    def _observation(self) -> dict:
        """The per-round attachments of a pathology episode (App. H.2): state summaries and the screenshot."""
        observe = getattr(self.env.registry.context, "observation", None)
        if observe is None:
            raise WorkerError("no_observation", "this viewer has no per-round observation")
        observation = observe()
        images = [observation.image.to_json(inline=True)] if observation.image is not None else []
        return {"direct_state_summary": observation.direct_state_summary,
                "gui_state_summary": observation.gui_state_summary, "images": images}

    def _start(self, request: dict) -> dict:
        builder = self.builders.get(request.get("viewer"))
        if builder is None:
            raise WorkerError("unknown_viewer", f"viewer must be one of {sorted(self.builders)}")
        self.env = None
        if self.before_episode is not None:
            self.before_episode()
        trace = AuditTrace(
            request.get("trace_path"),
            header=request.get("header") or {},
            save_images=bool(request.get("save_images", True)),
            window=request.get("trace_window"),  # a supervisor keeps the real trace: the child needs the last record
        )
        registry = builder(
            list(request.get("data_roots") or []), request.get("track", "A"), trace, request.get("max_rounds")
        )
        self.env = LocalEnvironment(registry)
        return {"tools": self.env.tools(), "actions": [action.describe() for action in registry.all_actions()],
                "config": registry.config, "state": registry.state()}


def _answer(service: WorkerService, line: bytes) -> dict:
    try:
        request = json.loads(line)
        if not isinstance(request, dict):
            raise ValueError("a request must be a JSON object")
    except ValueError as error:
        return {"id": None, "ok": False, "error": {"code": "bad_request", "message": str(error)}}
    try:
        return {"id": request.get("id"), "ok": True, "result": service.handle(request)}
    except WorkerError as error:
        return {"id": request.get("id"), "ok": False, "error": {"code": error.code, "message": str(error)}}


def exit_with_parent(parent_pid: int, poll_s: float = 1.0) -> None:
    """End this process once ``parent_pid`` is gone (POSIX).

    A runner killed with SIGKILL cannot shut its workers down, and a worker blocked in ``accept`` would live on
    forever holding a Slicer application; polling the runner's pid (not ``getppid``: the real Slicer runs
    under its launcher) frees it within ``poll_s``.
    """
    if os.name != "posix":  # os.kill(pid, 0) would terminate the process on Windows
        return

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                os._exit(3)
            except PermissionError:  # the pid exists (owned by someone else): keep waiting
                pass

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def serve_worker(
    service: WorkerService,
    token: str,
    port: int = 0,
    ready_file: str | None = None,
    parent_pid: int | None = None,
) -> None:
    """Serve clients one after another on 127.0.0.1 until a ``shutdown`` request (or the parent's death)."""
    if parent_pid:
        exit_with_parent(parent_pid)
    server = socket.create_server(("127.0.0.1", port))
    if ready_file:  # written atomically once we listen: the launcher polls for it
        temporary = Path(ready_file).with_suffix(".tmp")
        temporary.write_text(json.dumps({"port": server.getsockname()[1], "pid": os.getpid()}))
        os.replace(temporary, ready_file)
    with server:
        while not service.stopping:
            connection, _ = server.accept()
            with connection, connection.makefile("rwb") as stream:
                hello = json.loads(stream.readline() or b"{}")
                if not hmac.compare_digest(str(hello.get("token", "")), token):
                    stream.write(
                        b'{"ok": false, "error": {"code": "unauthorized", "message": "bad token"}}\n'
                    )
                    continue
                stream.write(b'{"ok": true}\n')
                stream.flush()
                for line in stream:
                    stream.write(json.dumps(_answer(service, line), default=str).encode() + b"\n")
                    stream.flush()
                    if service.stopping:
                        break


def main(argv: list[str] | None = None, builders: dict[str, Callable[..., ActionRegistry]] | None = None) -> int:
    parser = argparse.ArgumentParser(description="MedOpenClaw headless benchmark worker (slicer-core)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--parent-pid", type=int, help="exit when this process (the runner) is gone")
    args = parser.parse_args(argv)
    token = os.environ.get(TOKEN_ENV)
    if not token:
        parser.error(f"{TOKEN_ENV} must be set")
    faulthandler.enable()  # a native crash leaves the Python stack in worker.log
    serve_worker(WorkerService(builders), token, args.port, args.ready_file, args.parent_pid)
    return 0


# ----------------------------------------------------------------------------------------------- client side
def worker_arguments(ready_file: str, port: int) -> list[str]:
    """The arguments every worker launcher passes: where to listen, where to report readiness, whom to outlive."""
    return ["--port", str(port), "--ready-file", ready_file, "--parent-pid", str(os.getpid())]


def headless_command(ready_file: str, port: int = 0) -> list[str]:
    return [sys.executable, "-m", "MedOpenClawLib.bench.worker", *worker_arguments(ready_file, port)]


def slicer_command(slicer: str, ready_file: str, port: int = 0) -> list[str]:
    """The real 3D Slicer, windowless, serving the registry through ``scripts/run_bench.py``."""
    if not RUN_BENCH_SCRIPT.exists():
        raise FileNotFoundError(
            f"{RUN_BENCH_SCRIPT} is missing; --slicer needs the source checkout's scripts/"
        )
    return [slicer, "--no-main-window", "--python-script", str(RUN_BENCH_SCRIPT), *worker_arguments(ready_file, port)]


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
    ):
        """``command(ready_file)`` overrides the launch command (default: headless, or ``slicer`` when given)."""
        self.workdir = Path(workdir)
        self.slicer = slicer
        self.command = command
        self.startup_timeout_s = startup_timeout_s
        self.call_timeout_s = call_timeout_s
        self.process: subprocess.Popen | None = None
        self._stream = None
        self._socket: socket.socket | None = None
        self._ids = itertools.count(1)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self) -> WorkerProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        ready = self.workdir / f"ready-{secrets.token_hex(4)}.json"
        if self.command is not None:
            command = self.command(str(ready))
        else:
            command = slicer_command(self.slicer, str(ready)) if self.slicer else headless_command(str(ready))
        token = secrets.token_urlsafe(24)
        env = {**os.environ, TOKEN_ENV: token}
        log = open(self.workdir / "worker.log", "ab")  # noqa: SIM115 - owned by the child process
        # a session of its own: a Ctrl-C at the terminal reaches the runner only, which decides what stops
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                        start_new_session=True)
        log.close()
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
            self._socket = socket.create_connection(("127.0.0.1", port), timeout=self.startup_timeout_s)
            self._stream = self._socket.makefile("rwb")
            self._send({"op": "hello", "token": token})
            if not json.loads(self._stream.readline() or b"{}").get("ok"):
                raise WorkerFault("worker refused the handshake")
        except OSError as error:
            self.kill()
            raise WorkerFault(f"cannot connect to the worker: {error}") from error
        return self

    def _send(self, message: dict) -> None:
        self._stream.write(json.dumps(message, default=str).encode() + b"\n")
        self._stream.flush()

    def request(self, op: str, timeout_s: float | None = None, **fields) -> dict:
        """Send one request and wait for its answer; a refused request raises :class:`WorkerError`."""
        if self._stream is None:
            raise WorkerFault("worker is not running")
        request_id = next(self._ids)
        try:
            self._socket.settimeout(timeout_s or self.call_timeout_s)
            self._send({"id": request_id, "op": op, **fields})
            line = self._stream.readline()
        except TimeoutError:
            self.kill()
            raise WorkerHung(
                f"worker did not answer {op!r} within {timeout_s or self.call_timeout_s:g} s"
            ) from None
        except OSError as error:
            self.kill()
            raise WorkerFault(f"lost the worker during {op!r}: {error}") from error
        if not line:
            code = self.process.poll() if self.process else None
            self.kill()
            raise WorkerFault(f"worker closed the connection during {op!r} (exit code {code})")
        answer = json.loads(line)
        if answer.get("id") != request_id:
            self.kill()
            raise WorkerFault(f"protocol error: answer to request {answer.get('id')}, expected {request_id}")
        if not answer.get("ok"):
            error = answer.get("error") or {}
            raise WorkerError(error.get("code", "error"), error.get("message", ""))
        return answer["result"]

    def kill(self) -> None:
        for handle in (self._stream, self._socket):
            if handle is not None:
                try:
                    handle.close()
                except OSError:
                    pass
        self._stream = self._socket = None
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait(timeout=30)

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
    """An episode :class:`~.episode.Environment` whose registry lives in a worker process."""

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
    ) -> None:
        self._tools = self.worker.request(
            "start",
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


if __name__ == "__main__":
    sys.exit(main())

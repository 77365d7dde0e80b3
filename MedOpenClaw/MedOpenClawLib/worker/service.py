"""The worker side: a service holding at most one registry, served on a loopback socket.

Run headless as ``python -m MedOpenClawLib.worker``, or inside the real 3D Slicer by ``scripts/run_bench.py``.
"""

from __future__ import annotations

import argparse
import faulthandler
import hmac
import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from ..core import settings
from ..core.audit import AuditTrace
from ..core.registry import ActionRegistry
from ..core.result import VIEW_STREAM, RenderedImage
from ..pathology.actions import build_pathology_registry
from ..replay import replay_records
from .environment import LocalEnvironment
from .lifecycle import exit_with_parent
from .protocol import (
    ATTACHMENTS,
    PART,
    PIXELS,
    STREAM_BUFFER,
    SUPERVISED_RECORD_KEYS,
    TOKEN_ENV,
    WorkerError,
    no_delay,
    write_message,
)

_SLICER_APP = []  # the worker's one Slicer application, reused by every episode


def build_radiology(data_roots: list[str], track: str, trace: AuditTrace, max_rounds: int | None) -> ActionRegistry:
    """A registry over the worker's Slicer application with an emptied scene.

    One application per worker, cleared between episodes: creating the logic classes anew costs about a second
    per episode, and tearing down a headless application whose scene held markups crashes VTK (segfault).
    """
    from ..apps.radiology import build_slicer_registry  # slicer (vtk): radiology workers only
    from ..viewer.application import SlicerApplication  # slicer: radiology workers only

    if not _SLICER_APP:
        _SLICER_APP.append(SlicerApplication.create())
    app = _SLICER_APP[0]
    app.scene.Clear(0)
    return build_slicer_registry(data_roots=data_roots, track=track, trace=trace, max_rounds=max_rounds, app=app)


def build_pathology(
    data_roots: list[str], track: str, trace: AuditTrace, max_rounds: int | None
) -> ActionRegistry:
    return build_pathology_registry(data_roots=data_roots, track=track, trace=trace, max_rounds=max_rounds)


# viewer kind -> registry builder; a request can only choose among these names
BUILDERS: dict[str, Callable[..., ActionRegistry]] = {
    "radiology": build_radiology,
    "pathology": build_pathology,
}


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

    def handle(self, request: dict, parts: PartStream | None = None) -> dict:
        """The result of one request; ``parts`` streams the views a call renders (a ``stream_views`` request)."""
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
            streaming = VIEW_STREAM.set(parts) if parts is not None else None
            try:
                result = self.env.registry.call(  # the Result itself: how its images travel depends on the request
                    request.get("name"),
                    request.get("arguments"),  # as sent: ``[]`` must be refused, not called as ``{}``
                    actor=request.get("actor", "agent"),
                    round_id=request.get("round_id"),
                    audit_extra=request.get("audit_extra"),
                )
            finally:
                if streaming is not None:
                    VIEW_STREAM.reset(streaming)
            streamed = parts.sent if parts is not None else []
            if not request.get("with_record"):
                return result.to_json(inline_images=True)
            trace = self.env.registry.trace
            record = {key: trace.records[-1].get(key) for key in SUPERVISED_RECORD_KEYS}
            body, pngs = result.to_wire(streamed)  # the views' PNGs travel as attachments, never as base64
            # the record may hold a delta: the full state is sent
            return {"result": body, "record": {**record, "state": trace.last_state}, ATTACHMENTS: pngs}
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
            # a supervisor keeps the real trace: the child needs the last record, and no chain of its own
            window=request.get("trace_window"),
            chained=request.get("trace_chained", True),
        )
        registry = builder(
            list(request.get("data_roots") or []), request.get("track", "A"), trace, request.get("max_rounds")
        )
        self.env = LocalEnvironment(registry)
        return {"tools": self.env.tools(), "actions": [action.describe() for action in registry.all_actions()],
                "config": registry.config, "state": registry.state()}


class PartStream:
    """Sends each view returned to the agent as soon as it is rendered (called as :data:`VIEW_STREAM` on the thread
    that renders), as a part of the answer to request ``request_id``: its raw pixels, which the supervisor encodes
    while this process renders the next view, two processes on two cores instead of an encoder thread here
    contending with the renderer for one GIL. The answer names the views by the order they went in."""

    def __init__(self, stream, request_id: object):
        self._stream, self._request_id = stream, request_id
        self._open = True
        self.sent: list[RenderedImage] = []  # the images whose pixels went ahead, in order

    def __call__(self, image: RenderedImage) -> bool:
        """Whether ``image`` went ahead (not once the link is gone: the answer's own write then fails too, and ends
        this worker)."""
        if not self._open:
            return False
        pixels = image.pixels
        rows = memoryview(pixels) if pixels.flags.c_contiguous else pixels.tobytes()  # row by row, uncopied
        try:
            write_message(self._stream, {"id": self._request_id, PART: len(self.sent), PIXELS: list(pixels.shape)},
                          [rows])
        except OSError:
            self._open = False
            return False
        self.sent.append(image)
        return True


def _answer(service: WorkerService, line: bytes, stream=None) -> tuple[dict, list]:
    """The answer to one request line and the binary attachments its result carries (sent after the line; a
    ``stream_views`` call ``with_record`` sends its views' pixels on ``stream`` ahead of it, as they are rendered)."""
    try:
        request = json.loads(line)
        if not isinstance(request, dict):
            raise ValueError("a request must be a JSON object")
    except ValueError as error:
        return {"id": None, "ok": False, "error": {"code": "bad_request", "message": str(error)}}, []
    streaming = stream is not None and request.get("stream_views") and request.get("with_record")
    parts = PartStream(stream, request.get("id")) if streaming else None
    try:
        result = service.handle(request, parts)
    except WorkerError as error:
        return {"id": request.get("id"), "ok": False, "error": {"code": error.code, "message": str(error)}}, []
    attachments = result.pop(ATTACHMENTS, []) if isinstance(result, dict) else []
    return {"id": request.get("id"), "ok": True, "result": result}, attachments


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
            with no_delay(connection), connection.makefile("rwb", buffering=STREAM_BUFFER) as stream:
                hello = json.loads(stream.readline() or b"{}")
                if not hmac.compare_digest(str(hello.get("token", "")), token):
                    stream.write(
                        b'{"ok": false, "error": {"code": "unauthorized", "message": "bad token"}}\n'
                    )
                    continue
                stream.write(b'{"ok": true}\n')
                stream.flush()
                for line in stream:
                    write_message(stream, *_answer(service, line, stream))
                    if service.stopping:
                        break


def worker_token() -> str:
    """The token the runner set for this worker (never on argv); ValueError naming the variable when unset."""
    token = settings.value(TOKEN_ENV)
    if not token:
        raise ValueError(f"{TOKEN_ENV} must be set")
    return token


def end_process(code: int) -> NoReturn:
    """End the headless worker's process once it has served: nothing is left to write (traces are flushed per
    record), and the interpreter's teardown of Slicer and VTK would cost ~0.2 s of CPU and ~0.6 s per worker (it
    is also where VTK's destructors crash: :meth:`..viewer.application.SlicerApplication.close`)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None, builders: dict[str, Callable[..., ActionRegistry]] | None = None) -> int:
    parser = argparse.ArgumentParser(description="MedOpenClaw headless benchmark worker (slicer-core)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--parent-pid", type=int, help="exit when this process (the runner) is gone")
    args = parser.parse_args(argv)
    try:
        token = worker_token()
    except ValueError as error:
        parser.error(str(error))
    faulthandler.enable()  # a native crash leaves the Python stack in worker.log
    serve_worker(WorkerService(builders), token, args.port, args.ready_file, args.parent_pid)
    return 0

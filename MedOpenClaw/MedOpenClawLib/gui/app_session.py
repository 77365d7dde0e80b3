"""The session inside the Slicer application: one registry, one audit trace, one optional REST server.

The MedOpenClaw panel (server controls, audit log) and the MedCopilot panel share this object, so the
clinician's actions, the copilot's and those of REST clients land in one trace with their actor.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from ..apps.radiology import build_slicer_registry
from ..core import settings
from ..core.audit import AuditTrace, fresh_path
from ..core.policy import TRACKS, DataRootPolicy
from ..core.registry import ActionRegistry
from ..server.rest import RestService, new_token
from .loopback_server import LoopbackRestServer


class AppSession:
    def __init__(self, registry: ActionRegistry):
        self.registry = registry
        self.token = settings.value("MEDOPENCLAW_TOKEN") or new_token()
        self.server: LoopbackRestServer | None = None

    @classmethod
    def create(
        cls,
        sessions_dir: str | os.PathLike,
        data_roots: list[str] | None = None,
        track: str = "A",
        max_rounds: int | None = None,
        app=None,
    ) -> AppSession:
        """A new trace under a new ``sessions_dir/<timestamp>[-n]/`` (rendered views saved beside it)."""
        if track not in TRACKS:
            raise ValueError(f"track must be one of {TRACKS}")
        directory = new_session_directory(Path(sessions_dir))
        trace = AuditTrace(directory / "trace.jsonl", header={"front_end": "slicer"}, save_images=True)
        registry = build_slicer_registry(data_roots or [], track=track, trace=trace, max_rounds=max_rounds,
                                         app=app, artifacts_dir=directory / "artifacts")
        return cls(registry)

    @property
    def trace(self) -> AuditTrace:
        return self.registry.trace

    @property
    def policy(self):
        return self.registry.policy

    # ----------------------------------------------------------------------------------------- policy
    def set_data_roots(self, roots: list[str]) -> None:
        missing = [root for root in roots if not Path(root).is_dir()]
        if missing:
            raise ValueError(f"not a directory: {', '.join(missing)}")
        self.policy.data_roots = DataRootPolicy(roots)
        self.trace.record_event("policy_change", {"data_roots": self.policy.data_roots.to_json()}, actor="human")

    def set_budget(self, max_rounds: int | None) -> None:
        if max_rounds is not None and max_rounds < 1:
            raise ValueError("the budget is a positive number of rounds, or unlimited")
        self.policy.max_rounds = max_rounds
        self.trace.record_event("policy_change", {"max_rounds": max_rounds}, actor="human")

    # ----------------------------------------------------------------------------------------- server
    @property
    def serving(self) -> bool:
        return self.server is not None and self.server.running

    def start_server(self, port: int = 0) -> str:
        if not self.serving:
            self.server = LoopbackRestServer(RestService(self.registry, self.token), port)
            self.server.start()
            self.trace.record_event("server_start", {"url": self.server.url}, actor="human")
        return self.server.url

    def stop_server(self) -> None:
        if self.serving:
            self.server.stop()
            self.trace.record_event("server_stop", {}, actor="human")
        self.server = None


_shared: AppSession | None = None
_listeners: list[Callable[[AppSession], None]] = []


def shared_session() -> AppSession | None:
    return _shared


def set_shared_session(session: AppSession) -> None:
    """Replace the shared session (e.g. another track was chosen) and tell the panels bound to it."""
    global _shared
    if _shared is not None and _shared is not session:
        _shared.stop_server()
    _shared = session
    for listener in list(_listeners):
        listener(session)


def on_session_changed(listener: Callable[[AppSession], None]) -> None:
    _listeners.append(listener)


def remove_session_listener(listener: Callable[[AppSession], None]) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def new_session_directory(sessions_dir: Path) -> Path:
    """``sessions_dir/<YYYYmmdd-HHMMSS>``, created here, or ``-2``, ``-3``... when another session took that second
    (a quick track switch, the module's sub-tests): no session ever writes into another's folder."""
    sessions_dir.mkdir(parents=True, exist_ok=True)
    stem = time.strftime("%Y%m%d-%H%M%S")
    while True:
        candidate = fresh_path(sessions_dir, stem)
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:  # taken between the check and the creation
            continue

"""Replay: re-execute a trace's actions on a fresh session and compare every recorded viewer-state snapshot.

The trace's ``session_config`` record says how to rebuild the session (application, track, viewport), except
for what it may read: the data roots always come from the caller (the command line, the server's own
configuration), never from the trace under check, whose recorded roots a crafted trace could widen. Model
receipts and other non-action records are skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .core.applications import RADIOLOGY, application_named
from .core.audit import StateDeltaError, StateReplay, read_trace
from .core.registry import ActionRegistry
from .pathology.actions import build_pathology_registry
from .pathology.viewer import DEFAULT_VIEWPORT, HeadlessWsiViewer

IGNORED_STATE_KEYS = ("time",)


@dataclass
class ReplayReport:
    ok: bool
    actions: int
    first_mismatch_seq: int | None = None
    message: str = ""
    expected: dict | None = None
    actual: dict | None = None

    def to_json(self) -> dict:
        return {"ok": self.ok, "actions": self.actions, "first_mismatch_seq": self.first_mismatch_seq,
                "message": self.message, "expected": self.expected, "actual": self.actual}


def session_config(records: list[dict]) -> dict:
    for record in records:
        if record.get("kind") == "session_config":
            return record.get("payload", {})
    raise ValueError("the trace has no session_config record; it cannot be replayed")


def build_from_config(config: dict, data_roots: list[str | os.PathLike],
                      artifacts_dir: str | os.PathLike | None = None) -> ActionRegistry:
    """A fresh headless session like the recorded one: a replay started inside the Slicer GUI (or against a
    QuPath-backed trace) never touches the user's viewer. A session that had an artifact folder gets
    ``artifacts_dir`` (artifacts get the same names there, see ``fresh_path``)."""
    if not isinstance(config, dict):
        raise ValueError("the trace's session_config is not an object")
    try:
        app = application_named(config.get("app", RADIOLOGY))
    except ValueError as error:
        raise ValueError(f"{error} in session_config") from None
    roots = list(data_roots)
    options = {"track": config.get("track", "A"), "max_rounds": config.get("max_rounds")}
    if app == RADIOLOGY:
        from .apps.radiology import build_headless_slicer_registry  # slicer-core (vtk): radiology replays only

        if config.get("artifacts"):
            options["artifacts_dir"] = artifacts_dir
        return build_headless_slicer_registry(roots, **options)

    viewport = tuple(config.get("viewport") or DEFAULT_VIEWPORT)
    return build_pathology_registry(roots, viewer=HeadlessWsiViewer(viewport), **options)


def first_difference(expected, actual, path: str = "") -> str | None:
    """A readable pointer to the first differing leaf, e.g. ``views.axial.offset_mm: 12.5 != 10.0``."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            if key in IGNORED_STATE_KEYS:
                continue
            found = first_difference(expected.get(key), actual.get(key), f"{path}.{key}" if path else key)
            if found:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for index, (left, right) in enumerate(zip(expected, actual)):
            found = first_difference(left, right, f"{path}[{index}]")
            if found:
                return found
        return None
    return None if expected == actual else f"{path or 'state'}: {expected!r} != {actual!r}"


@contextmanager
def images_without_pixels(registry: ActionRegistry) -> Iterator[None]:
    """A replay needs the geometry of the images it re-renders (later 0..999 arguments are read on it), not their
    pixels: skipping the reslice makes it several times faster. Viewers without the switch render as usual."""
    engine = getattr(registry.context, "engine", None)
    if not hasattr(engine, "render_pixels"):
        yield
        return
    engine.render_pixels = False
    try:
        yield
    finally:
        engine.render_pixels = True


def replay_records(registry: ActionRegistry, records: list[dict]) -> ReplayReport:
    """Re-execute the action records among ``records`` on ``registry``, checking status and state after each.

    Shared by :func:`replay_trace` and by the crash supervisor, which restores a restarted viewer this way. Each
    replayed action costs the same wherever it stands in the trace: the expected state is rebuilt record by
    record (never all of them held at once), compared once (``==``; :func:`first_difference` only explains a
    mismatch), and a call the trace says succeeded takes no checkpoint (see ``undoable``).
    """
    actions = [record for record in records if isinstance(record, dict) and record.get("kind") == "action"]
    try:
        expected = StateReplay()
        for record in actions:  # a malformed delta anywhere refuses the trace before anything runs
            expected.after(record)
    except StateDeltaError as error:
        return ReplayReport(False, 0, None, f"the trace's state deltas do not apply: {error}")
    refused = engine_refusal(registry, actions)
    if refused is not None:
        return refused
    with images_without_pixels(registry):
        return _replay(registry, actions)


def engine_refusal(registry: ActionRegistry, actions: list[dict]) -> ReplayReport | None:
    """A replay runs each operator on the engine the trace recorded (``backend``: BRAINSFit inside 3D Slicer,
    SimpleITK headless), or not at all: another engine gives other transforms and a mismatch that blames the
    trace. None when ``registry`` runs every engine the actions recorded."""
    engine = getattr(registry.context, "engine", None)
    app = getattr(engine, "app", None)
    if app is None:
        return None  # a viewer without operators (pathology): nothing recorded a backend
    from .operators.brainsfit import SLICER_ENGINES, engines  # SimpleITK: only where operators ran

    available = engines(app)
    for record in actions:
        data = ((record.get("result") or {}).get("data") or {}) if record.get("status") == "ok" else {}
        backend = (data.get("parameters") or {}).get("backend") if isinstance(data, dict) else None
        if backend is not None and backend not in available:
            where = ("inside 3D Slicer, where its BRAINS CLI modules are loaded" if backend in SLICER_ENGINES
                     else "on a headless session")
            return ReplayReport(False, len(actions), record.get("seq"),
                                f"{record['action']} (#{record.get('seq')}) ran {backend}, which this replay "
                                f"cannot run (it has {', '.join(available)}): replay the trace {where}")
    return None


def _replay(registry: ActionRegistry, actions: list[dict]) -> ReplayReport:
    expected = StateReplay()
    for record in actions:
        expected_state = expected.after(record)
        succeeded = record.get("status") == "ok"
        # the recorded arguments exactly: ``[]`` must be refused again, not replayed as ``{}``
        result = registry.call(record["action"], record.get("arguments"), actor=record.get("actor", "agent"),
                               round_id=record.get("round"), undoable=not succeeded)
        status = "ok" if result.ok else "error"
        if status != record.get("status"):
            return ReplayReport(False, len(actions), record["seq"],
                                f"{record['action']}: recorded {record.get('status')}, replayed {status}"
                                f" ({(result.error or {}).get('message', '')})")
        actual_state = registry.trace.last_state  # the snapshot the replayed call was just recorded with
        if actual_state == expected_state:
            continue
        difference = first_difference(expected_state, actual_state)
        if difference:
            return ReplayReport(False, len(actions), record["seq"], f"{record['action']}: {difference}",
                                expected_state, actual_state)
    return ReplayReport(True, len(actions), None, f"all {len(actions)} action snapshots match")


def replay_trace(path: str | os.PathLike, data_roots: list[str | os.PathLike],
                 artifacts_dir: str | os.PathLike | None = None) -> ReplayReport:
    """Replay with the session reading only ``data_roots`` (the caller's, never the trace's);
    ``artifacts_dir`` receives what the replayed session writes (default: a temporary folder)."""
    if artifacts_dir is None:
        with tempfile.TemporaryDirectory(prefix="medopenclaw-replay-") as scratch:
            return replay_trace(path, data_roots, scratch)
    records = read_trace(path)
    return replay_records(build_from_config(session_config(records), data_roots, artifacts_dir), records)


def run_replay(args: argparse.Namespace) -> int:
    """``medopenclaw replay TRACE --data-root DIR``: the report as JSON; exit status 1 when a snapshot differs."""
    report = replay_trace(args.trace, args.data_root)
    print(json.dumps(report.to_json(), indent=2, default=str))
    return 0 if report.ok else 1

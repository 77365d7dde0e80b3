"""The sessions a front-end (``serve``, ``mcp``) exposes: its command-line options, the data roots it may serve,
the application it serves and the registry each session gets.

A session is one registry -- by default a :class:`~.supervisor.SupervisedRegistry` whose viewer runs in a child
process, so a native crash answers ``viewer_crashed`` instead of ending the server; ``--in-process`` keeps the
scene in the server's own process (for debugging with a native debugger). The application (radiology or
pathology) is ``--app``, or chosen by what the data roots hold. Ground truth is never served: a data root that is
a case package (``bench prepare --out``) is narrowed to its ``data/`` folder, and a root holding a package's
``hidden/`` folder anywhere else is refused before anything starts (a scan as deep as SCAN_DEPTH: the path resolver
refuses ground truth wherever it lies, :func:`~..policy.ground_truth`).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cli import SECONDS, Number, existing_directory, user_path
from ..core.applications import APPLICATIONS
from ..core.audit import AuditTrace
from ..core.policy import PACKAGE_DATA, PACKAGE_HIDDEN, PACKAGE_MANIFEST, is_package
from ..core.result import ActionError
from ..pathology.cases import SLIDE_SUFFIXES
from .supervisor import SupervisedRegistry

SCAN_DEPTH, SCAN_ENTRIES = 4, 20_000  # how far a data root is searched for packages and slides
VOLUME_SUFFIXES = (".nii", ".nii.gz", ".nrrd", ".nhdr", ".mha", ".mhd", ".dcm")
# records a long-running front-end keeps in memory; the trace file keeps them all
TRACE_WINDOW = 1000

# a served session's default round budget: an agent in a loop must end somewhere (a benchmark episode uses 20)
DEFAULT_ROUNDS = 500
# the options of sessions of their own (REST sessions, MCP HTTP clients), refused where there are none
OWN_SESSION_DEFAULTS = {"max_sessions": 4, "session_idle": 1800.0}
# each session is a viewer process (~150 MB, twice that with the spare) plus its connections and descriptors: more
# than this on one machine is a typo, and accepting 1000000000 let a client start viewers until memory ran out
MAX_SESSIONS = 64
CLOSING_WAIT_S = 30.0  # a new session waits this long for a slot whose session is being closed (its viewer stopping)


def round_budget(text: str) -> int | None:
    """``--max-rounds``: a non-negative integer; 0 means no budget."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 (no budget) or a positive number of rounds")
    return value or None


def add_session_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-root", action="append", required=True, type=existing_directory,
                        help="directory open_case may read (repeat); a case package is served only through its "
                             "data/ folder")
    parser.add_argument("--app", choices=("auto", *APPLICATIONS), default="auto",
                        help="the viewer to serve (default: pathology when the data roots hold whole-slide images "
                             "and no volumes, else radiology)")
    parser.add_argument("--track", choices=("A", "B"), default="A",
                        help="A: the viewer-native actions; B: also the advanced analysis operators")
    parser.add_argument("--max-rounds", type=round_budget, default=DEFAULT_ROUNDS, metavar="N",
                        help=f"tool-call rounds an agent may use in each session (default {DEFAULT_ROUNDS}; 0: no "
                             "budget). Human and system calls are not charged")
    parser.add_argument("--trace", type=user_path, default=None, help="audit trace JSONL (default: none on disk)")
    parser.add_argument("--in-process", action="store_true",
                        help="run the viewer in this process (no crash containment; for debugging)")
    parser.add_argument("--no-spare-viewer", dest="spare_viewer", action="store_false",
                        help="do not keep a second viewer process ready for restarts (saves ~110 MB; a restart then "
                             "waits for a viewer to start)")
    parser.add_argument("--call-timeout", type=SECONDS, default=300.0,
                        help="seconds before a call that has not returned counts as a hung viewer")
    parser.add_argument("--max-sessions", type=Number(int, minimum=1, maximum=MAX_SESSIONS), metavar="N",
                        help="sessions of their own open at once (REST: POST /v1/sessions; MCP over HTTP: one per "
                             "client), each a viewer process (~150 MB plus what it loads, twice that with the "
                             f"spare viewer; default {OWN_SESSION_DEFAULTS['max_sessions']})")
    parser.add_argument("--session-idle", type=SECONDS, metavar="S",
                        help="seconds without a request after which such a session ends (default "
                             f"{OWN_SESSION_DEFAULTS['session_idle']:g})")


# ------------------------------------------------------------------------------------------ the data roots
def _walk(root: Path):
    """(depth, directory entry) under ``root``, breadth first, links not followed, at most SCAN_ENTRIES."""
    level, seen = [root], 0
    for depth in range(1, SCAN_DEPTH + 1):
        below = []
        for folder in level:
            try:
                with os.scandir(folder) as listing:
                    for entry in listing:
                        seen += 1
                        if seen > SCAN_ENTRIES:
                            return
                        yield depth, entry
                        if entry.is_dir(follow_symlinks=False):
                            below.append(Path(entry.path))
            except OSError:
                continue
        level = below


def served_roots(roots: list[str]) -> tuple[list[str], list[str]]:
    """The roots to serve and one line per root that was narrowed; raises ValueError naming a root that would
    expose a package's ground truth (a ``hidden/`` folder or a manifest inside it, or a root inside ``hidden/``)."""
    served, notes = [], []
    for given in roots:
        root = Path(given).resolve()
        for ancestor in root.parents:
            data = ancestor / PACKAGE_DATA
            if is_package(ancestor) and not (root == data or data in root.parents):
                raise ValueError(f"--data-root {given} lies in the case package {ancestor} outside its data/ "
                                 f"folder: serve {ancestor / PACKAGE_DATA} instead")
        if is_package(root):
            if not (root / PACKAGE_DATA).is_dir():
                raise ValueError(f"--data-root {given} is a case package without a data/ folder: its hidden/ "
                                 f"ground truth is never served")
            notes.append(f"--data-root {given} is a case package: serving only {root / PACKAGE_DATA} "
                         f"(its {PACKAGE_HIDDEN}/ ground truth and {PACKAGE_MANIFEST} are not served)")
            root = root / PACKAGE_DATA
        for _, entry in _walk(root):
            if entry.name in (PACKAGE_HIDDEN, PACKAGE_MANIFEST) and is_package(Path(entry.path).parent):
                raise ValueError(f"--data-root {given} holds a case package's ground truth ({entry.path}): serve "
                                 f"that package's data/ folder instead")
        served.append(str(root))
    return served, notes


def choose_application(requested: str, roots: list[str]) -> tuple[str, str | None]:
    """The application to serve and, when it was chosen from the roots' contents, the line that says why."""
    if requested != "auto":
        return requested, None
    slides = volumes = 0
    for root in roots:
        for _, entry in _walk(Path(root)):
            name = entry.name.lower()
            slides += name.endswith(SLIDE_SUFFIXES)
            volumes += name.endswith(VOLUME_SUFFIXES)
    if slides and not volumes:
        return "pathology", f"serving the pathology viewer: the data roots hold {slides} whole-slide image(s) " \
                            f"and no volumes (--app radiology to override)"
    return "radiology", None


def prepare_session_arguments(args: argparse.Namespace, own_sessions: bool) -> None:
    """Narrow or refuse the data roots and settle ``--app``, printing one line (stderr) for each decision; refuse
    the options of sessions of their own where the front-end has none (``own_sessions`` false: one shared scene),
    rather than ignore them."""
    given = [f"--{dest.replace('_', '-')}" for dest in OWN_SESSION_DEFAULTS if getattr(args, dest) is not None]
    if given and not own_sessions:
        raise ValueError(f"{' and '.join(given)}: this front-end opens no sessions of their own (it serves one "
                         "scene: REST --in-process, or MCP over stdio)")
    for dest, default in OWN_SESSION_DEFAULTS.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)
    args.data_root, notes = served_roots(args.data_root)
    args.app, why = choose_application(args.app, args.data_root)
    for line in [*notes, *([why] if why else [])]:
        print(line, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ the registries
def session_registry(args: argparse.Namespace, header: dict, save_images: bool, window: int | None = TRACE_WINDOW,
                     trace_path: Path | None = None, background: bool = False):
    """One session's registry of ``args.app`` (after :func:`prepare_session_arguments`), supervised unless
    ``--in-process``; ``trace_path`` (default ``--trace``) is its audit trace, ``window`` bounds the records kept in
    memory, ``background`` lets a supervised viewer boot behind the first calls (which wait for it)."""
    trace_path = args.trace if trace_path is None else trace_path
    if args.in_process:
        trace = AuditTrace(trace_path, header=header, save_images=save_images, window=window)
        return build_in_process(args.app, args.data_root, args.track, trace, args.max_rounds)
    if trace_path is None:  # the supervisor restores sessions from their trace file: keep a private one
        workdir = Path(tempfile.mkdtemp(prefix="medopenclaw-viewer-"))
        trace = AuditTrace(workdir / "trace.jsonl", header=header, window=window)
    else:
        workdir = trace_path.with_name(trace_path.stem + "_viewer")
        trace = AuditTrace(trace_path, header=header, save_images=save_images, window=window)
    return SupervisedRegistry(args.app, args.data_root, track=args.track, max_rounds=args.max_rounds,
                              trace=trace, workdir=workdir, remove_workdir=trace_path is None,
                              call_timeout_s=args.call_timeout, spare=args.spare_viewer, background=background)


def build_in_process(application: str, data_roots: list[str], track: str, trace: AuditTrace,
                     max_rounds: int | None):
    if application == "pathology":
        from ..pathology.actions import build_pathology_registry  # openslide/tiffslide: only in-process viewers

        return build_pathology_registry(data_roots, track=track, trace=trace, max_rounds=max_rounds)
    from ..apps.radiology import build_slicer_registry  # slicer (vtk): seconds to import, only in-process viewers

    return build_slicer_registry(data_roots, track=track, trace=trace, max_rounds=max_rounds)


def client_trace_path(trace: Path | None, number: int) -> Path | None:
    """Where the ``number``-th client session of a multi-client front-end writes its trace: beside ``--trace``."""
    return None if trace is None else trace.with_name(f"{trace.stem}.client{number}{trace.suffix or '.jsonl'}")


def close_session(registry) -> None:
    """Stop a supervised viewer's child process (an in-process registry holds nothing to stop)."""
    close = getattr(registry, "close", None)
    if close is not None:
        close()



@dataclass
class _Session:
    number: int
    registry: Any = None  # None while the factory builds it
    last_use: float = 0.0  # monotonic
    running: int = 0  # requests holding it
    built: threading.Event = field(default_factory=threading.Event)
    closing: bool = False  # being closed: it keeps its slot until its viewer processes are gone


class SessionPool:
    """The sessions of a multi-client front-end, by key (an MCP session id, a REST session id): each its own
    registry -- viewer process, scene, audit trace, round budget -- built by ``factory(number, client)`` for the
    ``number``-th session. At most ``max_sessions`` at once; with ``idle_s``, a session without a request for that
    long is closed (never while a request holds it). Each session's memory is bounded by its viewer's voxel and
    tile ceilings and its trace's in-memory window (:data:`TRACE_WINDOW`)."""

    def __init__(self, factory: Callable[[int, dict], Any], max_sessions: int, idle_s: float | None = None,
                 closing_wait_s: float = CLOSING_WAIT_S):
        if not 1 <= max_sessions <= MAX_SESSIONS:
            raise ValueError(f"max_sessions must be from 1 to {MAX_SESSIONS}")
        self.factory, self.max_sessions, self.idle_s = factory, max_sessions, idle_s
        self.closing_wait_s = closing_wait_s
        self._sessions: dict[str, _Session] = {}
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._stopped = threading.Event()
        if idle_s is not None:
            threading.Thread(target=self._expire_loop, name="session-expiry", daemon=True).start()

    def open(self, key: str, client: dict | None = None) -> Any:
        """The registry of session ``key``, built now when the key is new (a concurrent request for the same key
        waits for it); ActionError ``too_many_sessions`` when ``max_sessions`` are open."""
        with self._lock:
            session = self._sessions.get(key)
            if session is not None and session.closing:
                raise ActionError("session_unavailable", "the session is being closed")
            building = session is None
            if building:
                # a slot held by a session being closed frees once its viewer is gone: wait for that, not longer
                deadline = time.monotonic() + self.closing_wait_s
                while (len(self._sessions) >= self.max_sessions and deadline > time.monotonic()
                       and any(other.closing for other in self._sessions.values())):
                    self._freed.wait(deadline - time.monotonic())
                if len(self._sessions) >= self.max_sessions:
                    raise ActionError("too_many_sessions", f"{self.max_sessions} sessions are open: end one or "
                                                           f"wait for one to expire")
                session = self._sessions[key] = _Session(next(self._numbers), last_use=time.monotonic())
            session.last_use = time.monotonic()
        if not building:
            session.built.wait()
            if session.registry is None:
                raise ActionError("session_unavailable", "the session could not be started")
            return session.registry
        try:
            session.registry = self.factory(session.number, client or {})
        except BaseException:
            with self._lock:
                self._sessions.pop(key, None)
            raise
        finally:
            session.built.set()
        return session.registry

    def number(self, key: str) -> int | None:
        """The session's number (it names its trace), None when there is no such session."""
        with self._lock:
            session = self._sessions.get(key)
            return None if session is None else session.number

    @contextlib.contextmanager
    def use(self, key: str) -> Iterator[Any]:
        """The session's registry for one request (None when there is no such session): it cannot expire
        meanwhile, and its idle time starts again when the request ends."""
        with self._lock:
            session = self._sessions.get(key)
            if session is not None and (session.registry is None or session.closing):
                session = None
            if session is not None:
                session.running += 1
        try:
            yield None if session is None else session.registry
        finally:
            if session is not None:
                with self._lock:
                    session.running -= 1
                    session.last_use = time.monotonic()

    def release(self, key: str) -> bool:
        """End session ``key``, returning once its viewer is stopped; whether there was one."""
        with self._lock:
            session = self._sessions.get(key)
            if session is None or session.closing:
                return False
            session.closing = True
        self._close([(key, session)])
        return True

    def _close(self, sessions: list[tuple[str, _Session]]) -> None:
        """Stop each (closing) session's viewer, then free its slot: a slot is free only once its processes are
        gone, so ``max_sessions`` bounds the viewers alive, not just the sessions listed."""
        for key, session in sessions:
            try:
                session.built.wait()
                if session.registry is not None:
                    close_session(session.registry)
            finally:
                with self._lock:
                    if self._sessions.get(key) is session:
                        del self._sessions[key]
                    self._freed.notify_all()

    def expire_idle(self) -> list[int]:
        """Close every session idle for ``idle_s`` or longer; the numbers of those closed."""
        if self.idle_s is None:
            return []
        now = time.monotonic()
        with self._lock:
            expired = [(key, session) for key, session in self._sessions.items()
                       if session.registry is not None and not session.running and not session.closing
                       and now - session.last_use >= self.idle_s]
            for _, session in expired:
                session.closing = True
        self._close(expired)
        return [session.number for _, session in expired]

    def _expire_loop(self) -> None:
        while not self._stopped.wait(min(30.0, max(0.05, self.idle_s / 4))):
            self.expire_idle()

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def close(self) -> None:
        """End every session."""
        self._stopped.set()
        with self._lock:
            sessions = [(key, session) for key, session in self._sessions.items() if not session.closing]
            for _, session in sessions:
                session.closing = True
        self._close(sessions)

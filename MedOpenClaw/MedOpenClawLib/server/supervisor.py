"""Crash containment for ``serve`` and ``mcp``: the scene lives in a supervised child process.

A native crash (a VTK/ITK segfault or abort) or a hang while one call runs must not take the server down with
it. :class:`SupervisedRegistry` offers what the front-ends use of an
:class:`~MedOpenClawLib.core.registry.ActionRegistry` (tool listing, ``call``, ``state``, ``trace``) and forwards
each call to a benchmark worker process (:mod:`..worker`, same protocol) hosting the viewer and the real
registry. The parent owns the audit trace: the child's records are re-chained into it, so a child dying
mid-write can never corrupt it.

When the child dies or stops answering during a call, the caller gets ``{ok: false, error: {code:
"viewer_crashed"}}`` and the call is not applied (nor charged to the round budget); a fresh child is started
and the session is restored by replaying the trace's action records
(:func:`~MedOpenClawLib.replay.replay_records`, every snapshot checked); the trace gets a ``viewer_crashed``
system record (skipped by replay, so ``trace verify`` and ``replay`` still pass). More than ``max_crashes``
crashes within ``crash_window_s`` seconds, or a restore whose snapshots diverge from the trace, close the
session: later calls are answered ``viewer_unavailable`` (and audited). A spare child, started in the
background, waits ready for the next restart, so a recovery costs the replay rather than a viewer's start-up.
"""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from .. import apps
from ..core.audit import AuditTrace, read_trace
from ..core.hygiene import bounded_message, refused_input
from ..core.registry import ToolCatalog, call_identity, hygiene_refusal, unrecordable_reason
from ..core.result import ActionError, Result, relayed
from ..core.toolset import ActionSpec
from ..worker import client as worker
from ..worker.client import WorkerProcess
from ..worker.protocol import ATTACHMENTS, WorkerError, WorkerFault, WorkerGarbled, WorkerHung

VIEWER_CRASHED = "viewer_crashed"
VIEWER_UNAVAILABLE = "viewer_unavailable"
REPLAY_KEYS = ("seq", "kind", "action", "arguments", "actor", "round", "status", "state", "state_delta",
               "duration_ms")


def worker_command(ready_file: str) -> list[str]:
    """How the child is launched; tests swap in a worker whose engine crashes on purpose."""
    return worker.headless_command(ready_file)


class SpareViewer:
    """A viewer process booted in the background, so a restart after a crash does not wait for one to start."""

    def __init__(self, child: WorkerProcess, boot: Callable[[WorkerProcess], object]):
        """``boot(child)`` starts ``child`` (not yet started) and opens its session."""
        self._booting = child  # kept from the start: :meth:`discard` may stop it mid-boot
        self._child: WorkerProcess | None = None
        self._thread = threading.Thread(target=self._boot, args=(boot,), name="spare-viewer", daemon=True)
        self._thread.start()

    def _boot(self, boot: Callable[[WorkerProcess], object]) -> None:
        try:
            boot(self._booting)
            self._child = self._booting
        except (WorkerFault, WorkerError, OSError):  # a spare that cannot start is simply not there
            self._child = None

    def wait(self) -> bool:
        """Wait until the spare finished booting; whether it started."""
        self._thread.join()
        return self._child is not None

    def take(self) -> WorkerProcess | None:
        """The spare if it started and still answers (waiting for it to finish booting), else None."""
        self.wait()
        child, self._child = self._child, None
        if child is not None and not child.alive():
            child.kill()
            return None
        return child

    def discard(self) -> None:
        """Stop the spare, mid-boot too (its boot then fails and ends): a spare nobody will take is not worth the
        rest of a viewer's start-up, about 2 s of CPU."""
        self._booting.abort()
        self.wait()
        self._booting.kill()


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class SupervisedRegistry(ToolCatalog):
    """An action registry whose viewer runs in a child process that is restarted and restored after a crash."""

    def __init__(
        self,
        viewer: str = "radiology",
        data_roots: list[str] | None = None,
        track: str = "A",
        max_rounds: int | None = None,
        trace: AuditTrace | None = None,
        workdir: str | Path | None = None,
        remove_workdir: bool = False,
        call_timeout_s: float = 300.0,
        startup_timeout_s: float = 120.0,
        max_crashes: int = 3,
        crash_window_s: float = 600.0,
        command: Callable[[str], list[str]] | None = None,
        spare: bool = True,
        background: bool = False,
    ):
        """``viewer`` names a builder of :data:`~MedOpenClawLib.worker.service.BUILDERS`; ``workdir`` receives the
        child's ``worker.log`` (default: a temporary folder; :meth:`close` removes it then, or when
        ``remove_workdir``). The session is restored from ``trace``, so it must hold every record: give it a file
        or no in-memory window. ``spare`` keeps a second child ready for restarts (about 110 MB of private memory).
        ``background`` returns at once, the tools listed from the catalog, while the child boots; calls wait for it
        (and are answered ``viewer_unavailable`` if it cannot start).
        """
        self.trace = trace if trace is not None else AuditTrace(None)
        self.start_request = {"viewer": viewer, "data_roots": [str(root) for root in data_roots or []],
                              "track": track, "max_rounds": max_rounds}
        self.remove_workdir = remove_workdir or workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix="medopenclaw-viewer-") if workdir is None else workdir)
        self.call_timeout_s = call_timeout_s
        self.startup_timeout_s = startup_timeout_s
        self.max_crashes = max_crashes
        self.crash_window_s = crash_window_s
        self.command = command or worker_command
        self.crashes: deque[float] = deque()  # monotonic times of the crashes inside the window
        self.closed_reason: str | None = None  # set once the viewer is given up
        self._lock = threading.RLock()
        self.spare = spare
        self._spare: SpareViewer | None = None
        self._worker: WorkerProcess | None = None
        self._actions = {spec.name: spec for spec in apps.specs(viewer, track)}
        self.track, self.config, self._state = track, {}, {}
        self._booted = threading.Event()
        # the first child, made before its boot begins: :meth:`close` may stop it at any point, even before launch
        self._booting = self._new_child()
        self._boot_thread: threading.Thread | None = None
        if background:
            self._boot_thread = threading.Thread(target=self._boot, args=(True,), name="viewer-boot", daemon=True)
            self._boot_thread.start()
        else:
            self._boot(False)

    def _boot(self, contain: bool) -> None:
        """Start the child and take its listing, configuration and first state; ``contain`` turns a failure into
        a closed session instead of an exception (a background boot has nobody to raise to)."""
        try:
            child, started = self._launch(self._booting)
        except (WorkerFault, WorkerError, OSError) as error:
            if not contain:
                raise
            with self._lock:  # a boot stopped by close() keeps close()'s reason
                self.closed_reason = self.closed_reason or bounded_message(f"the viewer could not start: {error}")
            self._booted.set()
            return
        with self._lock:
            if self.closed_reason is not None:  # closed while booting
                child.close()
                self._booted.set()
                return
            self._worker = child
            self._replenish_spare()
            self._actions = {item["name"]: ActionSpec.from_description(item) for item in started["actions"]}
            self.config = started["config"]
            self.track = self.config.get("track", self.track)
            self._state = started["state"]
            self.trace.record_event("session_config", self.config)
        self._booted.set()

    def wait_started(self) -> bool:
        """Wait for the child's boot; whether the session is open."""
        self._booted.wait(self.startup_timeout_s + 5.0)
        return self._booted.is_set() and self.closed_reason is None

    @property
    def viewer_pid(self) -> int | None:
        """The process id of the viewer now serving the calls (None while none runs): it changes after a crash."""
        worker = self._worker
        return worker.pid if worker is not None else None

    # ------------------------------------------------------------------ the registry interface
    def state(self) -> dict:
        """The snapshot after the last call: the scene changes only through calls, so no round trip is needed."""
        self.wait_started()
        with self._lock:
            return json.loads(json.dumps(self._state))

    def call(
        self,
        name: str,
        arguments: dict | None = None,
        actor: str = "agent",
        round_id: object = None,
        audit_extra: dict | None = None,
    ) -> Result:
        """Run one action in the child; never raises (but KeyboardInterrupt/SystemExit). A crash answers
        ``viewer_crashed`` and restores the session."""
        arguments = {} if arguments is None else arguments
        if not self.wait_started() and self.closed_reason is None:
            self.closed_reason = f"the viewer did not start within {self.startup_timeout_s:g} s"
        with self._lock:
            if self.closed_reason is not None:
                return self._refuse(name, arguments, actor, round_id)
            started = time.perf_counter()
            identity = call_identity(name, actor, round_id, audit_extra)
            refusal = hygiene_refusal(arguments)  # what fails the hygiene may not even be sendable to the child
            recorded = arguments if refusal is None else refused_input(arguments)
            try:  # the registry's own order: an unknown name first, then the hygiene
                self.lookup(name)
            except ActionError as error:
                refusal = error
            if refusal is not None:
                failure = Result.failure(refusal.code, bounded_message(refusal.message))
                return self._audit(failure, started, arguments=recorded, state=self._state, **identity)
            try:
                answer = self._worker.request("call", name=name, arguments=arguments, actor=actor,
                                              round_id=round_id, audit_extra=audit_extra, with_record=True,
                                              stream_views=True, relay=relayed)
                # each view arrives as raw pixels as soon as the child rendered it, and is encoded here (PNG and
                # base64, once) while the child renders the next; PNGs of other images are relayed as bytes
                result = Result.from_json(answer["result"], answer.get(ATTACHMENTS, ()))
                record = answer["record"]
            except WorkerFault as fault:
                return self._crashed(name, arguments, actor, round_id, fault)
            except (KeyError, TypeError, ValueError) as error:  # an answer out of protocol: a broken child
                garbled = WorkerGarbled(f"malformed answer: {bounded_message(repr(error), 200)}")
                return self._crashed(name, arguments, actor, round_id, garbled)
            except WorkerError as error:  # the child refused the request itself: a supervisor bug, not a crash
                failure = Result.failure("internal_error", bounded_message(f"the viewer refused the call: {error}"))
                return self._audit(failure, started, arguments=arguments, state=self._state, **identity)
            self._state = record["state"]
            return self._audit(result, started, actor=record["actor"], action=record["action"],
                               arguments=record["arguments"], state=record["state"], round_id=record["round"],
                               extra=record["extra"])

    def _audit(self, result: Result, started: float, **record) -> Result:
        """Write the call's record into this process's trace. Should that fail (a full disk), the child is
        restored from the trace as it stands, which undoes the call, and the call is answered as a failure."""
        try:
            self.trace.record_action(result=result, duration_ms=(time.perf_counter() - started) * 1000.0, **record)
            return result
        except Exception as error:
            failure = Result.failure(*unrecordable_reason(error))
        if result.ok:
            self._replace_worker()
        return failure

    def close(self) -> None:
        """Stop the child and the spare, and return only once their processes are gone (a boot still under way
        is waited for: its child is killed, or never launched), so whoever frees this session's slot after it
        never holds more viewers than slots. Later calls are answered ``viewer_unavailable``."""
        with self._lock:
            self.closed_reason = self.closed_reason or "the session was closed"
            worker, self._worker = self._worker, None
            spare, self._spare = self._spare, None
            booting = None if self._booted.is_set() else self._booting
        if booting is not None:  # nobody will use it: not worth the rest of a viewer's start-up (~2 s of CPU)
            booting.abort()
        if self._boot_thread is not None and self._boot_thread is not threading.current_thread():
            self._boot_thread.join()
        if worker is not None:
            worker.close()
        if spare is not None:
            spare.discard()
        if self.remove_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> SupervisedRegistry:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ child processes
    def _new_child(self) -> WorkerProcess:
        """A child's handle, not yet started."""
        return WorkerProcess(self.workdir, startup_timeout_s=self.startup_timeout_s,
                             call_timeout_s=self.call_timeout_s, command=self.command, own_session=False)

    def _launch(self, child: WorkerProcess | None = None) -> tuple[WorkerProcess, dict]:
        """``child`` (default: a new one) started with a fresh session (its own trace stays in memory, the last
        record alone, unchained: this process owns the real one, and chains and delta-encodes each record itself)."""
        child = (child or self._new_child()).start()
        try:
            return child, child.request("start", trace_path=None, header={"supervised": True}, save_images=False,
                                        trace_window=1, trace_chained=False, timeout_s=self.startup_timeout_s,
                                        **self.start_request)
        except (WorkerFault, WorkerError):
            child.kill()
            raise

    def _replenish_spare(self) -> None:
        if self.spare and self._spare is None:
            self._spare = SpareViewer(self._new_child(), self._launch)

    def _fresh_child(self) -> tuple[WorkerProcess, bool]:
        """The spare when one is ready, else a newly launched child; and whether it was the spare."""
        spare, self._spare = self._spare, None
        child = spare.take() if spare is not None else None
        return (child, True) if child is not None else (self._launch()[0], False)

    def _history(self) -> list[dict]:
        """Every action record of the session, from the trace file when there is one (it holds everything)."""
        if self.trace.path is not None:
            records = read_trace(self.trace.path)
        elif self.trace.count == len(self.trace.records):
            records = list(self.trace.records)
        else:
            raise ValueError("its early records left the in-memory window and it has no file")
        return [{key: record[key] for key in REPLAY_KEYS if key in record}
                for record in records if record.get("kind") == "action"]

    def _replace_worker(self) -> dict:
        """Discard the child and restore the session on a new one; returns what the crash record reports."""
        self._discard(self._worker)
        self._worker = None
        outcome = self._restore()
        if not outcome["restored"] and self._spare is not None:  # the session is closed: no restart will come
            self._spare.discard()
            self._spare = None
        return outcome

    def _restore(self) -> dict:
        try:
            history = self._history()
        except (OSError, ValueError) as error:
            self.closed_reason = bounded_message(f"the session's audit trace cannot be read back: {error}")
            return {"restored": False}
        while True:
            now = time.monotonic()
            while self.crashes and now - self.crashes[0] > self.crash_window_s:
                self.crashes.popleft()
            if len(self.crashes) > self.max_crashes:
                self.closed_reason = (f"the viewer crashed {len(self.crashes)} times within "
                                      f"{self.crash_window_s:g} s; it is not restarted again")
                return {"restored": False}
            child = None
            try:
                child, from_spare = self._fresh_child()
                answer = child.request("restore", records=history, timeout_s=self._restore_timeout_s(history))
                report, state = answer["report"], answer["state"]
            except (WorkerFault, OSError):  # the new child died (or could not start) too: a crash of its own
                self._discard(child)
                self.crashes.append(time.monotonic())
                continue
            except (WorkerError, KeyError, TypeError) as error:
                self._discard(child)
                self.closed_reason = bounded_message(f"the restarted viewer refused the restore: {error}")
                return {"restored": False}
            if not report["ok"]:
                self._discard(child)
                self.closed_reason = bounded_message(
                    f"the restored session diverged from its audit trace: {report['message']}")
                return {"restored": False, "replay": report}
            self._worker, self._state = child, state
            self._replenish_spare()
            return {"restored": True, "replayed_actions": report["actions"], "spare_used": from_spare}

    def _restore_timeout_s(self, history: list[dict]) -> float:
        """Long enough for a replay that runs twice as slowly as the calls did (Track B operators can take
        minutes each), plus one call's timeout."""
        recorded_s = sum(float(record.get("duration_ms") or 0.0) for record in history) / 1000.0
        return self.startup_timeout_s + self.call_timeout_s + 2.0 * recorded_s

    @staticmethod
    def _discard(child: WorkerProcess | None) -> None:
        if child is not None:
            child.kill()

    def _crashed(self, name: str, arguments: dict, actor: str, round_id: object, fault: WorkerFault) -> Result:
        crashed_at = time.perf_counter()
        self.crashes.append(time.monotonic())
        exit_status = describe_exit(self._worker.process.returncode if self._worker.process else None)
        outcome = self._replace_worker()
        outcome["recovery_ms"] = round((time.perf_counter() - crashed_at) * 1000.0, 1)
        self.trace.record_event(VIEWER_CRASHED, {
            "action": name, "arguments": arguments, "actor": actor, "round": round_id, "cause": str(fault),
            "exit": exit_status, "worker_log": str(self.workdir / "worker.log"), "crashes_in_window":
            len(self.crashes), **outcome})
        if isinstance(fault, WorkerHung):
            message = f"the viewer stopped answering while running {name!r} and was stopped; "
        elif isinstance(fault, WorkerGarbled):
            message = f"the viewer sent a malformed answer while running {name!r} ({fault}) and was stopped; "
        else:
            message = f"the viewer crashed while running {name!r} ({exit_status}); "
        message += "the call was not applied. "
        if outcome["restored"]:
            message += (f"The viewer was restarted and the session restored from its audit trace "
                        f"({outcome['replayed_actions']} actions replayed); continue from the same state.")
        else:
            message += f"The session is closed: {self.closed_reason}."
        return Result.failure(VIEWER_CRASHED, message)

    def _refuse(self, name: str, arguments: dict, actor: str, round_id: object) -> Result:
        """A call after the viewer was given up: answered and audited as a system record (replay skips it)."""
        message = f"the viewer is no longer available ({self.closed_reason}); restart the server"
        self.trace.record_event(VIEWER_UNAVAILABLE, {"action": name, "arguments": arguments, "actor": actor,
                                                     "round": round_id})
        return Result.failure(VIEWER_UNAVAILABLE, message)

"""The action registry: the only entry point through which an agent, a clinician or a client touches a viewer.

Every call is looked up by name, checked against its JSON schema, the session's track and round budget,
dispatched to one handler, rolled back if it fails, and written to the audit trace with the resulting
viewer-state snapshot.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Iterable
from typing import Any

from .arguments import canonical_arguments
from .audit import AuditTrace, recordable
from .formats import FORMATS
from .hygiene import bounded_message, check_arguments, preview, refused_input
from .policy import SessionPolicy
from .result import ActionError, Result, warning_shape_problem
from .toolset import ROOT_RULES, Action, ActionContext, ActionSpec, Toolset, describe_rules

ACTORS = ("agent", "human", "system")


def unrecordable_reason(error: Exception) -> tuple[str, str]:
    """(code, message) for an outcome the audit trace cannot hold."""
    if isinstance(error, UnicodeError):
        return "unencodable_text", "the call produced text that is not well-formed Unicode; nothing was changed"
    if isinstance(error, ValueError) and "JSON compliant" in str(error):
        return "non_finite_result", "the call produced a non-finite number (NaN or Infinity); nothing was changed"
    return "unrecordable", bounded_message(f"the call's outcome could not be audited ({type(error).__name__}: "
                                           f"{error}); nothing was changed")


def hygiene_refusal(arguments: object) -> ActionError | None:
    """Why ``arguments`` fail the hygiene check (:func:`~.hygiene.check_arguments`), or None."""
    try:
        check_arguments(arguments)
    except ActionError as error:
        return error
    return None


def call_identity(name: object, actor: object, round_id: object, extra: dict | None) -> dict:
    """How a call is named in its audit record (``record_action`` keywords): an unknown actor as the agent, a
    name that is no short string as a bounded preview."""
    return {"actor": actor if actor in ACTORS else "agent", "round_id": recordable(round_id),
            "extra": recordable(extra),
            "action": name if isinstance(name, str) and len(name) <= 64 else preview(name)}


class ToolCatalog:
    """The tool listing of a registry, in-process or supervised: ``_actions`` by name, offered on ``track``."""

    _actions: dict[str, ActionSpec]
    track: str  # the session's track

    def all_actions(self) -> list[ActionSpec]:
        """Every declared action, whatever its tracks, in declaration order."""
        return list(self._actions.values())

    def actions(self, track: str | None = None) -> list[ActionSpec]:
        """The actions offered on ``track`` (the session's track by default), in declaration order."""
        track = track or self.track
        return [action for action in self._actions.values() if track in action.tracks]

    def get(self, name: str) -> ActionSpec | None:
        return self._actions.get(name) if isinstance(name, str) else None

    def lookup(self, name: object) -> ActionSpec:
        """The action named ``name``, or ``unknown_action``: looked up before any argument check."""
        action = self.get(name)
        if action is None:
            raise ActionError("unknown_action", f"no action named {preview(name)}; call one of the listed tools")
        return action

    def tools(self, fmt: str = "neutral") -> list[dict]:
        """The session track's actions in one of the core's formats (:data:`~.formats.FORMATS`; the model APIs'
        dialects: :func:`MedOpenClawLib.apps.tools`)."""
        return [FORMATS[fmt](action, "") for action in self.actions()]


class ActionRegistry(ToolCatalog):
    """Validates, gates, dispatches and audits calls to the actions of one or more toolsets."""

    def __init__(
        self,
        context: ActionContext,
        toolsets: Iterable[Toolset],
        trace: AuditTrace | None = None,
        config: dict | None = None,
    ):
        """``config`` describes how to rebuild an identical session; it opens the trace so replay can."""
        self.context = context
        self.trace = trace if trace is not None else AuditTrace(None)
        self.config = config or {}
        self._actions: dict[str, Action] = {}
        for toolset in toolsets:
            if toolset.attach is not None:
                toolset.attach(context)
            for action in toolset.actions:
                if action.name in self._actions:
                    raise ValueError(f"action {action.name!r} is declared twice")
                self._actions[action.name] = action
        self._lock = threading.RLock()
        self.trace.record_event("session_config", self.config)

    @property
    def policy(self) -> SessionPolicy:
        return self.context.policy

    @property
    def track(self) -> str:
        return self.policy.track

    def state(self) -> dict:
        """The viewer-state snapshot (what every audit record carries)."""
        return self.context.state()

    def call(
        self,
        name: str,
        arguments: dict | None = None,
        actor: str = "agent",
        round_id: object = None,
        audit_extra: dict | None = None,
        undoable: bool = True,
    ) -> Result:
        """Run one action; never raises (but KeyboardInterrupt/SystemExit). Every call is audited; a failed
        call, or one whose outcome cannot be recorded, leaves the context as it was -- unless ``undoable`` is
        False: then no checkpoint is taken (its cost grows with the scene) and a failure is left as it happened.
        Replay passes it for calls its trace says succeeded: one that fails now diverges, and the replayed
        session is refused and discarded anyway."""
        with self._lock:
            started = time.perf_counter()
            arguments = {} if arguments is None else arguments
            recorded_arguments = arguments
            checkpoint = None
            try:
                if not isinstance(actor, str) or actor not in ACTORS:
                    raise ActionError("invalid_actor", f"actor must be one of {ACTORS}")
                refusal = hygiene_refusal(arguments)
                if refusal is not None:
                    recorded_arguments = refused_input(arguments)
                action = self.lookup(name)  # an unknown name is answered as such, whatever its arguments hold
                if refusal is not None:
                    raise refusal
                arguments = recorded_arguments = canonical_arguments(action.name, arguments)
                self._check(action, arguments)
                if actor == "agent":
                    self.policy.charge_round(round_id)
                checkpoint = self.context.checkpoint() if undoable else None
                result = action.handler(self.context, **action.with_defaults(arguments))
                if not isinstance(result, Result):
                    raise TypeError(f"handler returned {type(result).__name__}, not a Result")
                problem = warning_shape_problem(result.data) if result.ok else None
                if problem:  # one warning shape for every action, so clients read warnings one way
                    raise TypeError(f"handler of {name}: {problem}")
            except ActionError as error:
                result = Result.failure(error.code, bounded_message(str(error.message)))
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as error:  # a handler bug must not leak a half-changed scene or a traceback
                result = Result.failure("internal_error", bounded_message(f"{type(error).__name__}: {error}"))
                result.data = {"traceback": bounded_message(traceback.format_exc(limit=3), 4000)}
            if not result.ok and checkpoint is not None:
                result = self._rollback(checkpoint, result)
            return self._audit(name, recorded_arguments, actor, round_id, audit_extra, result, checkpoint, started)

    def _rollback(self, checkpoint: Any, result: Result) -> Result:
        try:
            self.context.rollback(checkpoint)
        except Exception as error:
            result = Result.failure("rollback_failed", bounded_message(
                f"{(result.error or {}).get('message', '')}; undoing the call failed too: "
                f"{type(error).__name__}: {error}"))
        return result

    def _audit(self, name: object, arguments: Any, actor: object, round_id: object, extra: dict | None,
               result: Result, checkpoint: Any, started: float) -> Result:
        """Write the call's record. An outcome that cannot be recorded (text that is not well-formed Unicode,
        a non-finite number in the result or the state) is undone and recorded as a failure instead."""
        record = call_identity(name, actor, round_id, extra)
        try:
            self.trace.record_action(arguments=arguments, result=result, state=self.context.state(),
                                     duration_ms=(time.perf_counter() - started) * 1000.0, **record)
            return result
        except Exception as error:
            failure = Result.failure(*unrecordable_reason(error))
        if result.ok and checkpoint is not None:
            failure = self._rollback(checkpoint, failure)
        try:
            state = self.context.state()
        except Exception as error:
            state = {"unavailable": bounded_message(f"{type(error).__name__}: {error}")}
        duration_ms = (time.perf_counter() - started) * 1000.0
        for attempt in ({"arguments": refused_input(arguments), "state": state, **record},
                        {"arguments": refused_input(arguments), "state": {}, **record, "extra": None}):
            try:
                self.trace.record_action(result=failure, duration_ms=duration_ms, **attempt)
                break
            except Exception:
                continue
        return failure

    def _check(self, action: Action, arguments: dict) -> None:
        name = action.name
        if self.policy.track not in action.tracks:
            raise ActionError(
                "not_on_track",
                f"{name!r} is not available on track {self.policy.track} (tracks {', '.join(action.tracks)})",
            )
        if not isinstance(arguments, dict):
            raise ActionError("invalid_argument", "arguments must be a JSON object")
        errors = sorted(action.validator.iter_errors(arguments), key=lambda e: e.path)
        if errors:
            first = errors[0]
            where = "/".join(str(part) for part in first.absolute_path) or "arguments"
            message = first.message
            if first.validator in ROOT_RULES and not first.absolute_path:  # say which arguments the rule wants
                message = describe_rules({first.validator: first.validator_value})
            elif len(message) > 240:  # jsonschema quotes the whole offending value
                message = f"{preview(first.instance)} fails {first.validator!r}: {preview(first.validator_value)}"
            raise ActionError("invalid_argument", bounded_message(f"{name}: {where}: {message}"))

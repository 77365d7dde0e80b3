"""The action registry: the only entry point through which an agent, a clinician or a client touches a viewer.

Every call is looked up by name, checked against its JSON schema, the session's track and round budget,
dispatched to one handler, rolled back if it fails, and written to the audit trace with the resulting
viewer-state snapshot.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import jsonschema

from .audit import AuditTrace
from .policy import SessionPolicy
from .result import ActionError, Result

ROLES = ("session", "viewer", "evidence", "operator")
ACTORS = ("agent", "human", "system")


class ActionContext(Protocol):
    """What a registry needs from the application it drives (a Slicer scene, a WSI viewer, ...)."""

    policy: SessionPolicy

    def state(self) -> dict: ...

    def checkpoint(self) -> Any: ...

    def rollback(self, token: Any) -> None: ...


@dataclass(frozen=True)
class Action:
    """A named, schema-described operation. ``parameters`` is a JSON schema of type object."""

    name: str
    role: str
    description: str
    parameters: dict
    handler: Callable[..., Result]
    tracks: tuple[str, ...] = ("A", "B")

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"{self.name}: role must be one of {ROLES}")
        jsonschema.Draft202012Validator.check_schema(self.parameters)

    @cached_property
    def validator(self) -> jsonschema.protocols.Validator:
        """Built once: constructing a validator per call costs more than validating."""
        return jsonschema.Draft202012Validator(self.parameters)

    def openai_tool(self) -> dict:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def anthropic_tool(self) -> dict:
        return {"name": self.name, "description": self.description, "input_schema": self.parameters}

    def mcp_tool(self) -> dict:
        return {"name": self.name, "description": self.description, "inputSchema": self.parameters}

    def describe(self) -> dict:
        return {
            "name": self.name,
            "role": self.role,
            "tracks": list(self.tracks),
            "description": self.description,
            "parameters": self.parameters,
        }


def object_schema(properties: dict, required: Iterable[str] = (), **extra: Any) -> dict:
    """A closed JSON object schema: unknown argument names are rejected, as a model's typos must be."""
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    required = list(required)
    if required:
        schema["required"] = required
    schema.update(extra)
    return schema


@dataclass
class Toolset:
    """A group of actions declared next to their handlers with the :meth:`action` decorator."""

    name: str
    actions: list[Action] = field(default_factory=list)
    # called with the context when a registry is built, e.g. to add state sections the toolset maintains
    attach: Callable[[ActionContext], None] | None = None

    def action(
        self,
        name: str,
        role: str,
        description: str,
        properties: dict | None = None,
        required: Iterable[str] = (),
        tracks: tuple[str, ...] = ("A", "B"),
        **schema_extra: Any,
    ) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
        def register(handler: Callable[..., Result]) -> Callable[..., Result]:
            parameters = object_schema(properties or {}, required, **schema_extra)
            self.actions.append(Action(name, role, description, parameters, handler, tracks))
            return handler

        return register


class ActionRegistry:
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

    def actions(self, track: str | None = None) -> list[Action]:
        """The actions offered on ``track`` (the session's track by default), in declaration order."""
        track = track or self.policy.track
        return [action for action in self._actions.values() if track in action.tracks]

    def get(self, name: str) -> Action | None:
        return self._actions.get(name)

    def openai_tools(self) -> list[dict]:
        return [action.openai_tool() for action in self.actions()]

    def anthropic_tools(self) -> list[dict]:
        return [action.anthropic_tool() for action in self.actions()]

    def mcp_tools(self) -> list[dict]:
        return [action.mcp_tool() for action in self.actions()]

    def call(
        self,
        name: str,
        arguments: dict | None = None,
        actor: str = "agent",
        round_id: object = None,
        audit_extra: dict | None = None,
    ) -> Result:
        """Run one action; never raises. Failed calls roll the context back and are audited too."""
        with self._lock:
            started = time.perf_counter()
            arguments = {} if arguments is None else arguments
            checkpoint = None
            try:
                if actor not in ACTORS:
                    raise ActionError("invalid_actor", f"actor must be one of {ACTORS}")
                action = self._check(name, arguments)
                if actor == "agent":
                    self.policy.charge_round(round_id)
                checkpoint = self.context.checkpoint()
                result = action.handler(self.context, **arguments)
            except ActionError as error:
                result = Result.failure(error.code, error.message)
            except Exception as error:  # a handler bug must not leak a half-changed scene or a traceback
                result = Result.failure("internal_error", f"{type(error).__name__}: {error}")
                result.data = {"traceback": traceback.format_exc(limit=3)}
            if not result.ok and checkpoint is not None:
                self.context.rollback(checkpoint)
            duration_ms = (time.perf_counter() - started) * 1000.0
            self.trace.record_action(
                actor=actor,
                action=name,
                arguments=arguments,
                result=result,
                state=self.context.state(),
                duration_ms=duration_ms,
                extra=audit_extra,
                round_id=round_id,
            )
            return result

    def _check(self, name: str, arguments: dict) -> Action:
        if not isinstance(name, str) or name not in self._actions:
            raise ActionError("unknown_action", f"no action named {name!r}; call one of the listed tools")
        action = self._actions[name]
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
            raise ActionError("invalid_argument", f"{name}: {where}: {first.message}")
        return action

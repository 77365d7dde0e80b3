"""An action registry seen as an episode environment (:class:`~MedOpenClawLib.bench.episode.Environment`), here.

The worker service wraps its registry in this class; tests drive a registry through it directly.
"""

from __future__ import annotations

from ..core.formats import neutral_tool
from ..core.registry import ActionRegistry


def neutral_tools(registry: ActionRegistry) -> list[dict]:
    """The session track's actions as provider-neutral ``{name, description, parameters}`` dicts."""
    return [neutral_tool(action) for action in registry.actions()]


class LocalEnvironment:
    def __init__(self, registry: ActionRegistry):
        self.registry = registry

    def tools(self) -> list[dict]:
        return neutral_tools(self.registry)

    def call(
        self,
        name: str,
        arguments: dict,
        actor: str = "agent",
        round_id: object = None,
        audit_extra: dict | None = None,
    ) -> dict:
        result = self.registry.call(name, arguments, actor=actor, round_id=round_id, audit_extra=audit_extra)
        return result.to_json(inline_images=True)

    def record_event(self, kind: str, payload: dict) -> None:
        self.registry.trace.record_event(kind, payload)

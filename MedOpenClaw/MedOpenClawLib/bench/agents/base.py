"""The agent protocol: given the conversation so far, produce the next step -- tool calls or a final answer.

Every agent, model-backed or offline, answers with a :class:`ModelReply` (text + tool calls + raw output),
so the episode loop, the audit receipts and the scorers treat a scripted oracle and a frontier model
identically.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from ...providers.messages import ImageInput, Message, ModelReply, ToolCall


@dataclass
class AgentContext:
    """What an agent knows when an episode starts. ``ground_truth`` is set only for privileged agents."""

    module: str
    case: Any  # bench.cases.Case (agent-visible metadata only)
    tools: list[dict]  # neutral {name, description, parameters}
    max_rounds: int
    one_call_per_round: bool = False
    ground_truth: Any = None
    seed: int = 0
    extra: dict = field(default_factory=dict)
    spec: Any = None  # the module's bench.spec.ModuleSpec (its offline-agent plans, its answer format)


class Agent(ABC):
    """Turns conversation + tool results into the next step. ``privileged`` agents may read ground truth."""

    name: str = "agent"
    privileged: bool = False

    def reset(self, context: AgentContext) -> None:
        self.context = context

    @abstractmethod
    def step(self, conversation: list[Message], allow_tools: bool = True) -> ModelReply:
        """Next turn. With ``allow_tools=False`` (budget spent) the agent must answer from what it has."""

    def describe(self) -> dict:
        """Run-manifest identity of the agent (never secrets)."""
        return {"name": self.name}


class BudgetExhausted(Exception):
    """Thrown into a scripted agent's plan when the round budget is spent: answer now."""


ToolRequest = tuple[str, dict]
Plan = Generator[list[ToolRequest], list[dict], str]


def last_tool_results(conversation: list[Message]) -> list[dict]:
    """Structured results of the latest round, in call order (``{"ok": False, ...}`` for rejected calls)."""
    results: list[dict] = []
    for message in reversed(conversation):
        if message.role == "tool":
            results.append(
                message.result or {"ok": False, "error": {"code": "rejected", "message": message.text}}
            )
        elif message.role == "assistant":
            break
    return list(reversed(results))


def last_tool_images(conversation: list[Message]) -> list[list[ImageInput]]:
    """Images returned by the latest round's tool calls, aligned with :func:`last_tool_results`."""
    images: list[list[ImageInput]] = []
    for message in reversed(conversation):
        if message.role == "tool":
            images.append(list(message.images))
        elif message.role == "assistant":
            break
    return list(reversed(images))


def latest_user_message(conversation: list[Message]) -> Message | None:
    """The newest user turn (the prompt, or a per-round observation carrying the current screenshot)."""
    return next((message for message in reversed(conversation) if message.role == "user"), None)


class ScriptedAgent(Agent):
    """An offline agent written as a plan: a generator that yields a round of ``(tool, arguments)`` requests,
    receives their structured results, and finally returns the answer text."""

    def reset(self, context: AgentContext) -> None:
        super().reset(context)
        self._plan: Plan | None = None
        self._ids = itertools.count()

    def plan(self, context: AgentContext) -> Plan:
        """This agent's plan for the context's module: the one its module spec names."""
        return context.spec.plan(self.name)(self, context)

    def step(self, conversation: list[Message], allow_tools: bool = True) -> ModelReply:
        self.conversation = conversation  # plans that read pixels look at the images in it
        try:
            if self._plan is None:
                self._plan = self.plan(self.context)
                requests = next(self._plan)
            elif not allow_tools:
                requests = self._plan.throw(BudgetExhausted())
            else:
                requests = self._plan.send(last_tool_results(conversation))
        except StopIteration as stop:
            return ModelReply(text=stop.value or "", raw={"final": stop.value or ""})
        except BudgetExhausted:
            return ModelReply(
                text="", raw={"final": "", "note": "plan had no answer when the budget ran out"}
            )
        calls = [
            ToolCall(
                id=f"{self.name}_{next(self._ids)}", name=name, arguments=dict(arguments), raw_arguments=""
            )
            for name, arguments in requests
        ]
        return ModelReply(text="", tool_calls=calls, raw={"tool_calls": [[n, a] for n, a in requests]})

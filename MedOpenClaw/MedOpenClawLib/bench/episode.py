"""One benchmark episode, following the paper's protocol (App. H): prompt with scene inventory and baseline
views, at most N tool-calling rounds with tool results (text + images) fed back, then a final answer.

Every round leaves "action receipts" in the audit trace (as in MedImageOSWorld): the raw model output,
any normalisation or repair of its tool arguments, whether each call was executed or rejected, and the
feedback the model received. The registry itself records each executed action with its state snapshot.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..providers.http import ProviderError
from ..providers.messages import ImageInput, Message, ToolCall, Usage
from .agents.base import Agent

BUDGET_NOTICE = (
    "Tool budget exhausted: all {rounds} tool-calling rounds are used and no more tools can be called. "
    "Give your best final answer now from the evidence already in context, in exactly the required format."
)


class Environment(Protocol):
    """A viewer serving an action registry: in-process or a worker process."""

    def tools(self) -> list[dict]: ...

    def call(
        self,
        name: str,
        arguments: dict,
        actor: str = "agent",
        round_id: object = None,
        audit_extra: dict | None = None,
    ) -> dict: ...

    def record_event(self, kind: str, payload: dict) -> None: ...


@dataclass
class EpisodePrompt:
    system: str
    user: str
    images: list[ImageInput] = field(default_factory=list)


@dataclass
class EpisodeConfig:
    max_rounds: int = 20  # 0: a single answer turn without tools (Track C)
    one_call_per_round: bool = False  # the pathology protocol: at most one tool call per round
    # pathology: after each round the model sees the current viewer state summary and screenshot again;
    # called with the environment and the number of tool rounds used so far
    round_observation: Callable[[Environment, int], tuple[str, list[ImageInput]]] | None = None
    # live progress: called after every model turn with the outcome so far and what the model did
    on_round: Callable[[EpisodeOutcome, str], None] | None = None


@dataclass
class EpisodeOutcome:
    status: str  # "completed" | "error" (the model provider failed: re-run later)
    final_text: str | None
    rounds: int = 0
    tool_calls: int = 0
    rejected_calls: int = 0
    failed_calls: int = 0
    budget_exhausted: bool = False
    images_received: int = 0
    usage: Usage = field(default_factory=Usage)
    error: dict | None = None  # ProviderError.to_json() when status == "error"
    tool_seconds: float = 0.0  # time inside the environment (viewer work + transport)
    wall_seconds: float = 0.0

    @property
    def harness_seconds(self) -> float:
        """Wall time not spent waiting for the model: the harness cost of the episode."""
        return max(self.wall_seconds - self.usage.model_seconds, 0.0)

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "final_text": self.final_text,
            "rounds": self.rounds,
            "tool_calls": self.tool_calls,
            "rejected_calls": self.rejected_calls,
            "failed_calls": self.failed_calls,
            "budget_exhausted": self.budget_exhausted,
            "images_received": self.images_received,
            "usage": self.usage.to_json(),
            "error": self.error,
            "tool_seconds": round(self.tool_seconds, 4),
            "harness_seconds": round(self.harness_seconds, 4),
            "wall_seconds": round(self.wall_seconds, 4),
        }


def result_images(result: dict, source: str) -> list[ImageInput]:
    return [
        ImageInput(image["png_base64"], f"{source}:{image.get('view', '')}")
        for image in result.get("images", [])
        if image.get("png_base64")
    ]


def feedback_text(result: dict) -> str:
    """What the model reads of a tool result: status, data or error, and which images are attached."""
    body = {"ok": result.get("ok", False)}
    if result.get("ok"):
        body["data"] = result.get("data", {})
    else:
        body["error"] = result.get("error")
    images = result.get("images", [])
    if images:
        body["images_attached"] = [image.get("view") for image in images]
        image_ids = [image.get("image_id") for image in images]
        if any(image_ids):  # 0..999 arguments may name the image they refer to
            body["image_ids"] = image_ids
    return json.dumps(body, sort_keys=True, default=str)


def rejection(code: str, message: str) -> dict:
    return {"ok": False, "data": {}, "images": [], "error": {"code": code, "message": message}}


class EpisodeLoop:
    """Drives one agent against one environment; environment faults propagate, a failed model call ends the
    episode in error (re-run later) with the provider's message."""

    def __init__(self, agent: Agent, env: Environment, config: EpisodeConfig):
        self.agent = agent
        self.env = env
        self.config = config
        self.conversation: list[Message] = []
        self.outcome = EpisodeOutcome(status="completed", final_text=None)
        self.offered = {tool["name"] for tool in agent.context.tools}  # what the model was shown

    def run(self, prompt: EpisodePrompt) -> EpisodeOutcome:
        started = time.perf_counter()
        self.conversation = [
            Message("system", prompt.system),
            Message("user", prompt.user, images=prompt.images),
        ]
        self.outcome.images_received = len(prompt.images)
        self.env.record_event(
            "episode_prompt",
            {
                "system": prompt.system,
                "user": prompt.user,
                "images": [image.receipt() for image in prompt.images],
                "tools": [tool["name"] for tool in self.agent.context.tools],
                "max_rounds": self.config.max_rounds,
                "one_call_per_round": self.config.one_call_per_round,
            },
        )
        try:
            self._loop()
        except ProviderError as error:
            self.outcome.status = "error"
            self.outcome.error = error.to_json()
        self.outcome.wall_seconds = time.perf_counter() - started
        self.env.record_event("episode_end", self.outcome.to_json())
        return self.outcome

    def _loop(self) -> None:
        outcome = self.outcome
        while True:
            allow_tools = outcome.rounds < self.config.max_rounds
            if not allow_tools and self.config.max_rounds > 0:  # max_rounds == 0: one answer turn (Track C)
                outcome.budget_exhausted = True
                self.conversation.append(Message("user", BUDGET_NOTICE.format(rounds=self.config.max_rounds)))
            reply = self.agent.step(self.conversation, allow_tools=allow_tools)
            outcome.usage.add(reply.usage)
            round_id = outcome.rounds + 1 if allow_tools and reply.tool_calls else None
            self.env.record_event(
                "model_output",
                {
                    "round": round_id,
                    "text": reply.text,
                    "raw": reply.raw,
                    "tool_calls": [call.receipt() for call in reply.tool_calls],
                    "stop_reason": reply.stop_reason,
                    "usage": reply.usage.to_json(),
                    "tools_allowed": allow_tools,
                },
            )
            self.conversation.append(Message("assistant", reply.text, tool_calls=list(reply.tool_calls)))
            if not reply.tool_calls or not allow_tools:
                # tool calls after the budget are not executed: the text is the answer
                outcome.rejected_calls += len(reply.tool_calls)
                outcome.final_text = reply.text
                self._report("answer")
                return
            outcome.rounds += 1
            for index, call in enumerate(reply.tool_calls):
                self._execute(call, outcome.rounds, index)
            self._report(", ".join(call.name for call in reply.tool_calls))
            if self.config.round_observation is not None:
                text, images = self.config.round_observation(self.env, outcome.rounds)
                outcome.images_received += len(images)
                self.conversation.append(Message("user", text, images=images))

    def _report(self, action: str) -> None:
        if self.config.on_round is not None:
            self.config.on_round(self.outcome, action)

    def _execute(self, call: ToolCall, round_id: int, index: int) -> None:
        outcome = self.outcome
        outcome.tool_calls += 1
        dispatched = False
        if self.config.one_call_per_round and index > 0:
            result = rejection(
                "one_call_per_round", "only one tool call per round is executed; this one was not"
            )
        elif call.parse_error is not None:
            result = rejection("invalid_json", f"{call.name}: {call.parse_error}; nothing was executed")
        elif call.name not in self.offered:  # hidden means refused: the environment may hold more actions
            result = rejection("unknown_action", f"{call.name!r} is not one of the tools offered in this episode; "
                                                 "nothing was executed")
        else:
            dispatched = True
            started = time.perf_counter()
            result = self.env.call(
                call.name,
                call.arguments,  # as the model sent them: the registry refuses a non-object, never rewrites it
                actor="agent",
                round_id=round_id,
                audit_extra={"round": round_id, "call_id": call.id},
            )
            outcome.tool_seconds += time.perf_counter() - started
        if not dispatched:
            outcome.rejected_calls += 1
        elif not result.get("ok"):
            outcome.failed_calls += 1
        images = result_images(result, call.name)
        outcome.images_received += len(images)
        text = feedback_text(result)
        structured = {key: value for key, value in result.items() if key != "images"}
        structured["images"] = [
            {k: v for k, v in image.items() if k != "png_base64"} for image in result.get("images", [])
        ]
        self.conversation.append(
            Message(
                "tool",
                text,
                images=images,
                tool_call_id=call.id,
                tool_name=call.name,
                is_error=not result.get("ok"),
                result=structured,
            )
        )
        self.env.record_event(
            "tool_receipt",
            {
                "round": round_id,
                "call_id": call.id,
                "name": call.name,
                "raw_arguments": call.raw_arguments,
                "arguments": call.arguments,
                "repair": call.repair,
                "executed": dispatched and bool(result.get("ok")),
                "dispatched": dispatched,
                "status": "ok" if result.get("ok") else "error",
                "error": result.get("error"),
                "feedback": text,
                "images": [image.receipt() for image in images],
            },
        )


def run_episode(
    agent: Agent, env: Environment, prompt: EpisodePrompt, config: EpisodeConfig
) -> EpisodeOutcome:
    return EpisodeLoop(agent, env, config).run(prompt)

"""One benchmark episode, following MedFlow-Bench's protocol (App. H): prompt with scene inventory and baseline
views, at most N tool-calling rounds with tool results (text + images) fed back, then a final answer.

Every round leaves "action receipts" in the audit trace (as in MedImageOSWorld): the raw model output,
any normalisation or repair of its tool arguments, whether each call was executed or rejected, and the
feedback the model received. The registry itself records each executed action with its state snapshot.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..providers.http import ProviderError
from ..providers.images import fit_png
from ..providers.messages import ImageInput, Message, ModelReply, ToolCall, Usage
from .agents.base import Agent
from .outcomes import EPISODE_TIMEOUT

BUDGET_NOTICE = (
    "Tool budget exhausted: all {spent} are used and no more tools can be called. "
    "Give your best final answer now from the evidence already in context, in exactly the required format."
)
CALL_BUDGET_SPENT = "the episode's budget of {calls} tool calls is spent: this call was not executed"
LENGTH_NOTICE = (
    "The conversation no longer fits the model server's limits, so no more tools can be called. Give your best "
    "final answer now from the evidence already in context, in exactly the required format."
)
EMPTY_NUDGE = "Your last reply was empty. Call a tool, or give your final answer in exactly the required format."
ANSWER_NOW = ("No tools can be called any more: that call was not executed. Give your final answer now, in exactly "
              "the required format, without calling a tool.")
CONTINUE = "Your reply was cut off at the output-token limit. Continue exactly where it stopped."
TRUNCATED_CALL = ("{name}: the call's arguments were cut off at the output-token limit (max_tokens), so nothing was "
                  "executed; send the call again, shorter")
MAX_CONTINUATIONS = 2
# what an old round's viewer state summary shrinks to under the conversation policy (each round brings the current one)
SUPERSEDED_STATE = "[earlier viewer state, not repeated: the latest one is current]"
# the protocol deviations counted per episode (process metrics): what the model did outside the API's contract
DEVIATIONS = ("tool_call_as_text", "empty_reply", "answer_in_reasoning", "tool_call_on_answer_turn")


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
    max_tool_calls: int | None = None  # --max-tool-calls: tool calls (operations) per episode, beside the rounds
    one_call_per_round: bool = False  # the pathology protocol: at most one tool call per round
    # pathology: after each round the model sees the current viewer state summary and screenshot again;
    # called with the environment and the number of tool rounds used so far
    round_observation: Callable[[Environment, int], tuple[str, list[ImageInput]]] | None = None
    # live progress: called after every model turn with the outcome so far and what the model did
    on_round: Callable[[EpisodeOutcome, str], None] | None = None
    # wall-clock seconds the episode may take (--episode-timeout), checked before every model turn and tool call
    # (one in flight is bounded by the provider's timeout and retry deadline, or the worker's --call-timeout);
    # None: no limit. Passing it ends the episode with stop_reason EPISODE_TIMEOUT (outcomes: whose fault)
    timeout_s: float | None = None


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
    # why the episode ended: "answer", "budget" (rounds spent), "model_length" (the server's limits were hit even
    # after compaction: answered without tools on a compact context and scored, as inspect_ai's model_length),
    # "refused" (the model declined or the server's content filter stopped it: no answer, scored 0, kept in n),
    # EPISODE_TIMEOUT (past --episode-timeout: see outcomes.timeout_fault)
    stop_reason: str = "answer"
    deviations: dict = field(default_factory=dict)  # DEVIATIONS kind -> count

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
            "stop_reason": self.stop_reason,
            "protocol_deviations": dict(self.deviations),
            "tool_seconds": round(self.tool_seconds, 4),
            "harness_seconds": round(self.harness_seconds, 4),
            "wall_seconds": round(self.wall_seconds, 4),
        }


def model_image(png_base64: str, label: str, view: str = "", image_id: str | None = None,
                offset_mm: float | None = None) -> ImageInput:
    """An image as it enters a model conversation: downscaled once if too large for the strictest server
    (:func:`~MedOpenClawLib.providers.images.fit_png`), tagged with what its stub will name."""
    data = base64.b64decode(png_base64)
    fitted = fit_png(data)
    encoded = png_base64 if fitted is data else base64.b64encode(fitted).decode("ascii")
    return ImageInput(encoded, label, view, image_id, offset_mm)


def result_images(result: dict, source: str) -> list[ImageInput]:
    return [
        model_image(image["png_base64"], f"{source}:{image.get('view', '')}", image.get("view") or "",
                    image.get("image_id"), image.get("slice_offset_mm"))
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
        self.started = time.perf_counter()
        self.offered = {tool["name"] for tool in agent.context.tools}  # what the model was shown

    def _timed_out(self, pieces: list[str]) -> bool:
        """Whether the episode has passed its wall-clock limit; if so it ends here (with any answer text so far)."""
        limit = self.config.timeout_s
        if limit is None or time.perf_counter() - self.started < limit:
            return False
        self.outcome.stop_reason = EPISODE_TIMEOUT
        self.outcome.final_text = "".join(pieces) or None
        self.env.record_event(EPISODE_TIMEOUT, {"limit_s": limit, "tool_seconds": round(self.outcome.tool_seconds, 3),
                                                "model_seconds": round(self.outcome.usage.model_seconds, 3)})
        self._report(EPISODE_TIMEOUT)
        return True

    def run(self, prompt: EpisodePrompt) -> EpisodeOutcome:
        started = self.started = time.perf_counter()
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
        nudged = refused = False  # one nudge per episode for an empty reply; one refusal of answer-turn calls
        pieces: list[str] = []  # an answer cut at the output-token limit, continued
        while True:
            if self._timed_out(pieces):
                return
            allow_tools = not self._budget_spent() and outcome.stop_reason != "model_length"
            if not allow_tools and self.config.max_rounds > 0 and outcome.stop_reason == "answer":
                outcome.budget_exhausted = True  # max_rounds == 0: one answer turn (Track C)
                outcome.stop_reason = "budget"
                self.conversation.append(Message("user", BUDGET_NOTICE.format(spent=self._budget_spent())))
            try:
                reply = self.agent.step(self.conversation, allow_tools=allow_tools)
            except ProviderError as error:
                if not error.length:
                    raise
                self.env.record_event("model_length", {"error": error.to_json(), "answer_turn": not allow_tools})
                if outcome.stop_reason == "model_length":  # the compact answer turn was refused too: no answer
                    outcome.final_text = "".join(pieces) or None
                    self._report("model_length")
                    return
                outcome.stop_reason = "model_length"
                self.conversation.append(Message("user", LENGTH_NOTICE))
                continue
            outcome.usage.add(reply.usage)
            deviations = self._deviations(reply, allow_tools, nudged)
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
                    "request": reply.request,
                    "deviations": deviations,
                    "refusal": reply.refusal,
                },
            )
            if reply.refusal is not None:
                outcome.stop_reason = "refused"
                outcome.final_text = None
                self._report("refused")
                return
            if not reply.empty:  # servers refuse an empty assistant turn in the history (Anthropic content: [])
                self.conversation.append(Message("assistant", reply.text, tool_calls=list(reply.tool_calls),
                                                 vendor=reply.vendor))
            if reply.tool_calls and not allow_tools:
                if not refused:  # refused with a request to answer, once; then the text is the answer
                    refused = True
                    for call in reply.tool_calls:
                        self._refuse(call, "answer_required", ANSWER_NOW)
                    self.conversation.append(Message("user", ANSWER_NOW))
                    continue
                outcome.rejected_calls += len(reply.tool_calls)
            elif reply.tool_calls:
                outcome.rounds += 1
                for index, call in enumerate(reply.tool_calls):
                    if self._timed_out(pieces):
                        return
                    if self._calls_left() == 0:  # a reply with more calls than the budget has left
                        self._refuse(call, "budget_exhausted", CALL_BUDGET_SPENT.format(
                            calls=self.config.max_tool_calls))
                    else:
                        self._execute(call, outcome.rounds, index, reply.truncated)
                self._report(", ".join(call.name for call in reply.tool_calls))
                if self.config.round_observation is not None:
                    text, images = self.config.round_observation(self.env, outcome.rounds)
                    outcome.images_received += len(images)
                    self.conversation.append(Message("user", text, images=images, superseded=SUPERSEDED_STATE))
                continue
            elif reply.paused and not reply.empty and len(pieces) < MAX_CONTINUATIONS:
                pieces.append(reply.text)  # Anthropic pause_turn: the turn sent back as it is continues
                continue
            elif not reply.text and not nudged and not pieces:
                nudged = True
                self.conversation.append(Message("user", EMPTY_NUDGE))
                continue
            elif reply.text and reply.truncated and len(pieces) < MAX_CONTINUATIONS:
                pieces.append(reply.text)  # "length" with text: let it continue
                self.conversation.append(Message("user", CONTINUE))
                continue
            text = reply.text
            if not text and not pieces and reply.reasoning:  # the documented rule: see _deviations
                text = reply.reasoning
            outcome.final_text = "".join(pieces) + text
            self._report("answer")
            return

    def _calls_left(self) -> int | None:
        if self.config.max_tool_calls is None:
            return None
        return max(self.config.max_tool_calls - self.outcome.tool_calls, 0)

    def _budget_spent(self) -> str:
        """Which budget bounds the episode now ("" while tools may still be called)."""
        if self.outcome.rounds >= self.config.max_rounds:
            return f"{self.config.max_rounds} tool-calling rounds"
        if self._calls_left() == 0:
            return f"{self.config.max_tool_calls} tool calls"
        return ""

    def _deviations(self, reply: ModelReply, allow_tools: bool, nudged: bool) -> list[str]:
        """What this reply did outside the API's contract (counted in the outcome and the process metrics).

        The rule for an answer left only in ``reasoning_content`` / thinking: when a reply has no text and no tool
        call after the one nudge for an empty reply, its reasoning text is taken as the answer (the parsers read
        the answer lines in it), and the deviation is recorded."""
        found = []
        if any(call.from_text for call in reply.tool_calls):
            found.append("tool_call_as_text")
        if reply.tool_calls and not allow_tools:
            found.append("tool_call_on_answer_turn")
        if not reply.text and not reply.tool_calls and reply.refusal is None and not reply.paused:
            found.append("answer_in_reasoning" if nudged and reply.reasoning else "empty_reply")
        for kind in found:
            self.outcome.deviations[kind] = self.outcome.deviations.get(kind, 0) + 1
        return found

    def _report(self, action: str) -> None:
        if self.config.on_round is not None:
            self.config.on_round(self.outcome, action)

    def _refuse(self, call: ToolCall, code: str, message: str) -> None:
        """Answer a call that is not executed (the API needs a result for every call id)."""
        self.outcome.rejected_calls += 1
        text = feedback_text(rejection(code, message))
        self.conversation.append(Message("tool", text, tool_call_id=call.id, tool_name=call.name, is_error=True,
                                         result=rejection(code, message)))
        self.env.record_event("tool_receipt", {"round": None, "call_id": call.id, "name": call.name,
                                               "raw_arguments": call.raw_arguments, "arguments": call.arguments,
                                               "repair": call.repair, "executed": False, "dispatched": False,
                                               "status": "error", "error": {"code": code, "message": message},
                                               "feedback": text, "images": []})

    def _execute(self, call: ToolCall, round_id: int, index: int, truncated: bool = False) -> None:
        outcome = self.outcome
        outcome.tool_calls += 1
        dispatched = False
        if self.config.one_call_per_round and index > 0:
            result = rejection(
                "one_call_per_round", "only one tool call per round is executed; this one was not"
            )
        elif call.parse_error is not None and truncated:
            result = rejection("truncated", TRUNCATED_CALL.format(name=call.name))
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

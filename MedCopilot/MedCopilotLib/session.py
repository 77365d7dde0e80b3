"""One copilot session: user messages in, model turns, approvals, registry calls, evidence, final answer.

Everything here runs on the caller's (GUI) thread except the model request, which a :class:`~.worker.ModelWorker`
runs in a child process (inside Slicer a thread would advance only at the panel's timer ticks). The copilot can only
do what the registry offers: a proposal is an action name and JSON arguments, executed by
:meth:`ActionRegistry.call` with ``actor="agent"`` and the approval in the audit record; clinician decisions are
audited with ``actor="human"``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

from MedOpenClawLib.core.redaction import redact_text
from MedOpenClawLib.core.registry import ActionRegistry
from MedOpenClawLib.core.result import Result
from MedOpenClawLib.providers import ModelReply, Provider

from .approvals import ApprovalQueue, Decision, ProposalCard
from .conversation import Conversation
from .evidence_links import EvidenceBoard
from .worker import ModelCall, ModelWorker

SYSTEM_PROMPT = """You are MedCopilot, assisting a clinician who is looking at a study in 3D Slicer.
You can act only through the provided tools; every call is shown to the clinician, who may approve or reject it.
Explain briefly why you want to call a tool before calling it. Tool results come back as JSON and rendered views.
Evidence tools (bookmarks, key slices, points, ROIs, measurements) return an evidence id such as "ev1".
In your final answer, put the evidence ids supporting each claim in brackets right after the claim,
for example: "There is an enhancing lesion in the left frontal lobe [ev1, ev2]." Do not cite ids you were
not given. If the evidence is insufficient, say so."""

IDLE, THINKING, AWAITING_APPROVAL = "idle", "thinking", "awaiting_approval"
DEFAULT_MAX_TURNS = 25


class CopilotBusy(RuntimeError):
    """The user sent a message while the copilot was still working on the previous one."""


class CopilotSession:
    def __init__(
        self,
        registry: ActionRegistry,
        model: Provider,
        worker: ModelWorker | None = None,
        restore_view: Callable[[int], Result] | None = None,
        system_prompt: str = SYSTEM_PROMPT,
        auto_mode: bool = False,
        max_turns: int = DEFAULT_MAX_TURNS,
        secrets: Iterable[str] = (),
    ):
        self.registry = registry
        self.model = model
        self.worker = worker or ModelWorker()
        self.restore_view = restore_view
        self.conversation = Conversation(system_prompt)
        self.queue = ApprovalQueue(lambda name: any(action.name == name for action in registry.actions()), auto_mode)
        self.evidence = EvidenceBoard(registry.trace.records)
        self.max_turns = max_turns
        self.state = IDLE
        self._secrets = [secret for secret in secrets if secret]
        self._turns = 0
        self._round_ids = itertools.count(1)
        self._listeners: list[Callable[[], None]] = []
        self.worker.prepare(model)

    # ----------------------------------------------------------------------------------------------- events
    def add_listener(self, listener: Callable[[], None]) -> None:
        """Called after every change the panel must show (always on the GUI thread)."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

    def set_model(self, model: Provider, secrets: Iterable[str] = ()) -> None:
        """Switch provider or model between turns (the conversation so far is kept)."""
        self.model = model
        self._secrets = [secret for secret in secrets if secret]
        self.worker.prepare(model)

    # ------------------------------------------------------------------------------------------ user input
    def send(self, text: str) -> None:
        text = text.strip()
        if not text:
            raise ValueError("type a question or an instruction first")
        if self.state != IDLE:
            raise CopilotBusy("wait for the current answer, or press Stop")
        self.conversation.add_user(text)
        self.registry.trace.record_event("copilot_message", {"text": text}, actor="human")
        self._turns = 0
        self._ask_model()

    def approve(self, card_id: str) -> None:
        card = self.queue.approve(card_id)
        self._audit_decision(card)
        self._advance()

    def reject(self, card_id: str, reason: str = "") -> None:
        card = self.queue.reject(card_id, reason)
        self._audit_decision(card)
        self._advance()

    def set_auto_mode(self, enabled: bool) -> None:
        approved = self.queue.set_auto_mode(enabled)
        self.registry.trace.record_event("copilot_auto_mode", {"enabled": enabled}, actor="human")
        if approved and self.state == AWAITING_APPROVAL:
            self._advance()
        else:
            self._changed()

    def stop(self) -> None:
        """Drop a running model call and settle open proposals unrun; the conversation can continue (with a model
        process made ready for it: the dropped call's was ended)."""
        if self._drop_running_call():
            self.worker.prepare(self.model)

    def close(self) -> None:
        """Drop what runs and end the model process (the panel does this when it leaves the session)."""
        self._drop_running_call()
        self.worker.close()

    def _drop_running_call(self) -> bool:
        """Settle what the current turn left open; False when there was no turn."""
        if self.state == IDLE:
            return False
        self.worker.cancel()
        for card in self.queue.cancel_open("stopped by the clinician"):
            self._audit_decision(card)
        for card in self.queue.current():
            if not card.handled:
                self._report_not_run(card, card.reason or "not run: stopped by the clinician")
        self.conversation.add_notice("Stopped.")
        self.state = IDLE
        self._changed()
        return True

    def jump_to_evidence(self, ref: str) -> Result:
        """Show the viewer exactly as it was when the evidence item was captured."""
        item = self.evidence.get(ref)
        if item is None:
            return Result.failure("not_found", f"no evidence item {ref!r}")
        if self.restore_view is None:
            return Result.failure("unavailable", "restoring views is not available in this session")
        return self.restore_view(item.record_seq)

    # ------------------------------------------------------------------------------------------ model loop
    def poll(self) -> bool:
        """Deliver a finished model call (the panel calls this from a QTimer)."""
        return self.worker.poll()

    def _ask_model(self) -> None:
        if self._turns >= self.max_turns:
            self.conversation.add_notice(
                f"Stopped after {self.max_turns} model turns without a final answer; ask again to continue.", ok=False
            )
            self.state = IDLE
            self._changed()
            return
        self._turns += 1
        self.state = THINKING
        messages = self.conversation.messages()
        tools = [action.describe() for action in self.registry.actions()]
        self.worker.submit(ModelCall(self.model, messages, tools), self._on_reply, self._on_model_error)
        self._changed()

    def _on_reply(self, reply: ModelReply) -> None:
        self.registry.trace.record_event(
            "model_output",
            {
                "text": reply.text,
                "tool_calls": [call.receipt() for call in reply.tool_calls],
                "usage": reply.usage.to_json(),
            },
            actor="agent",
        )
        self.conversation.add_model_reply(reply)
        if not reply.tool_calls:
            self._finish(reply.text)
            return
        round_number = next(self._round_ids)
        for card in self.queue.propose(reply.tool_calls, reply.text, round_number):
            self.conversation.add_proposal(card.id)
            if card.decision is Decision.REJECTED:
                self.registry.trace.record_event(
                    "proposal_rejected", {"proposal": card.id, "action": card.call.name, "reason": card.reason}
                )
        self._advance()

    def _on_model_error(self, error: BaseException) -> None:
        message = redact_text(f"{type(error).__name__}: {error}", tuple(self._secrets))
        self.conversation.add_notice(f"The model call failed ({message}). Check the settings and ask again.", ok=False)
        self.registry.trace.record_event("model_error", {"error": message}, actor="system")
        self.state = IDLE
        self._changed()

    def _finish(self, answer: str) -> None:
        claims = self.evidence.link_answer(answer)
        links = {
            "claims": [
                {"text": claim.text, "refs": claim.refs, "unknown_refs": claim.unknown_refs,
                 "supported": claim.supported}
                for claim in claims
            ]
        }
        self.conversation.add_answer(answer, links)
        self.registry.trace.record_event("final_answer", {"text": answer, **links}, actor="agent")
        self.state = IDLE
        self._changed()

    # --------------------------------------------------------------------------------------- proposals
    def _advance(self) -> None:
        """Handle decided cards in order; when the whole turn is handled, give the outcomes to the model."""
        while (card := self.queue.next_to_handle()) is not None:
            if card.approved:
                self._execute(card)
            else:
                self._report_not_run(card, card.reason)
        if self.queue.current() and self.queue.turn_settled():
            self._ask_model()
        else:
            self.state = AWAITING_APPROVAL
            self._changed()

    def _execute(self, card: ProposalCard) -> None:
        result = self.registry.call(
            card.call.name,
            card.call.arguments,
            actor="agent",
            round_id=("copilot", card.round),
            audit_extra={"proposal": card.id, "approval": card.decision.value},
        )
        payload = result.to_json(inline_images=False)
        shown = f"{card.call.name}: " + ("ok" if result.ok else f"{result.error['code']}: {result.error['message']}")
        if result.ok and "evidence_id" in result.data:
            shown += f" — evidence {result.data['evidence_id']}"
        self.evidence.refresh()
        self.conversation.add_tool_result(card.call, payload, [image.png_bytes() for image in result.images],
                                          shown, result.ok)
        self.queue.mark_handled(card, result.ok)

    def _report_not_run(self, card: ProposalCard, reason: str) -> None:
        payload = {"ok": False, "error": {"code": "rejected", "message": reason}}
        self.conversation.add_tool_result(card.call, payload, [], f"{card.call.name}: not run — {reason}", False)
        self.queue.mark_handled(card, False)

    def _audit_decision(self, card: ProposalCard) -> None:
        self.registry.trace.record_event(
            "proposal_decision",
            {"proposal": card.id, "action": card.call.name, "decision": card.decision.value, "reason": card.reason},
            actor="human",
        )

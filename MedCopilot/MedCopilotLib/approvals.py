"""The approval queue: every action the model proposes waits for the clinician unless auto mode is on.

A card is decided exactly once (approved, rejected, or auto-approved) and executed at most once. Cards the
registry can never run — malformed JSON arguments or an action the registry does not offer — are rejected
automatically with the reason, so the model learns about its mistake instead of the clinician seeing a card
that cannot work.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from MedOpenClawLib.providers.messages import ToolCall


class Decision(str, Enum):
    PENDING = "pending"
    APPROVED = "approved"
    AUTO_APPROVED = "auto-approved"
    REJECTED = "rejected"


class ApprovalError(ValueError):
    """A click that is not allowed (unknown card, already decided): shown to the user, changes nothing."""


@dataclass
class ProposalCard:
    id: str
    call: ToolCall
    rationale: str
    round: int
    decision: Decision = Decision.PENDING
    reason: str = ""
    handled: bool = False  # executed, or its rejection reported back to the model
    ok: bool | None = None

    @property
    def decided(self) -> bool:
        return self.decision is not Decision.PENDING

    @property
    def approved(self) -> bool:
        return self.decision in (Decision.APPROVED, Decision.AUTO_APPROVED)


class ApprovalQueue:
    """Cards of the current model turn plus the history of all earlier ones (for the conversation view)."""

    def __init__(self, is_known_action: Callable[[str], bool], auto_mode: bool = False):
        self._is_known_action = is_known_action
        self.auto_mode = auto_mode
        self.cards: dict[str, ProposalCard] = {}
        self._current: list[str] = []
        self._ids = itertools.count(1)

    def propose(self, calls: Iterable[ToolCall], rationale: str, round_number: int) -> list[ProposalCard]:
        """Start a new turn's cards; the previous turn must be settled first."""
        if not self.turn_settled():
            raise ApprovalError("the previous proposals are still open")
        cards = []
        for call in calls:
            card = ProposalCard(f"P{next(self._ids)}", call, rationale, round_number)
            problem = self._problem(call)
            if problem:
                card.decision, card.reason = Decision.REJECTED, problem
            elif self.auto_mode:
                card.decision = Decision.AUTO_APPROVED
            self.cards[card.id] = card
            cards.append(card)
        self._current = [card.id for card in cards]
        return cards

    def _problem(self, call: ToolCall) -> str:
        if call.arguments is None:
            return f"the arguments of {call.name!r} were rejected: {call.parse_error or 'not a JSON object'}"
        if not self._is_known_action(call.name):
            return f"there is no action named {call.name!r}; use only the listed tools"
        return ""

    def approve(self, card_id: str) -> ProposalCard:
        card = self._open_card(card_id)
        card.decision = Decision.APPROVED
        return card

    def reject(self, card_id: str, reason: str = "") -> ProposalCard:
        card = self._open_card(card_id)
        card.decision = Decision.REJECTED
        card.reason = reason.strip() or "rejected by the clinician"
        return card

    def set_auto_mode(self, enabled: bool) -> list[ProposalCard]:
        """Switching auto mode on also approves the cards still waiting in the current turn."""
        self.auto_mode = enabled
        if not enabled:
            return []
        waiting = self.pending()
        for card in waiting:
            card.decision = Decision.AUTO_APPROVED
        return waiting

    def _open_card(self, card_id: str) -> ProposalCard:
        card = self.cards.get(card_id)
        if card is None:
            raise ApprovalError(f"no proposal {card_id!r}")
        if card.decided:
            raise ApprovalError(f"proposal {card_id} is already {card.decision.value}")
        return card

    def current(self) -> list[ProposalCard]:
        return [self.cards[card_id] for card_id in self._current]

    def pending(self) -> list[ProposalCard]:
        return [card for card in self.current() if not card.decided]

    def next_to_handle(self) -> ProposalCard | None:
        """The first card not yet handled, if it is decided: cards are handled in the order the model
        proposed them, so an approved card waits while an earlier one is still pending."""
        for card in self.current():
            if not card.handled:
                return card if card.decided else None
        return None

    def mark_handled(self, card: ProposalCard, ok: bool) -> None:
        card.handled, card.ok = True, ok

    def turn_settled(self) -> bool:
        """Every card of the turn is handled: time to send the outcomes to the model."""
        return all(card.handled for card in self.current())

    def cancel_open(self, reason: str) -> list[ProposalCard]:
        """Reject what is still waiting (the user pressed Stop or started over)."""
        waiting = self.pending()
        for card in waiting:
            card.decision, card.reason = Decision.REJECTED, reason
        return waiting

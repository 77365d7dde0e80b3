"""Conversation state: what the chat panel shows (entries) and what the model is sent (messages).

Both are appended together so the panel never shows something the model did not see, or the reverse.
Messages are the providers' neutral :class:`~MedOpenClawLib.providers.messages.Message`, which each provider
translates to its wire format (images of tool results included).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from MedOpenClawLib.providers.messages import ImageInput, Message, ModelReply, ToolCall

ENTRY_KINDS = ("user", "assistant", "proposal", "result", "answer", "notice")


@dataclass
class Entry:
    kind: str
    text: str = ""
    card_id: str | None = None
    images: list[bytes] = field(default_factory=list)
    ok: bool = True
    data: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in ENTRY_KINDS:
            raise ValueError(f"entry kind must be one of {ENTRY_KINDS}")


class Conversation:
    def __init__(self, system_prompt: str):
        self.system_prompt = system_prompt
        self.entries: list[Entry] = []
        self._messages: list[Message] = [Message("system", system_prompt)]

    def messages(self) -> list[Message]:
        return list(self._messages)

    def add_user(self, text: str) -> Entry:
        self._messages.append(Message("user", text))
        return self._show(Entry("user", text))

    def add_model_reply(self, reply: ModelReply) -> Entry | None:
        """Record the model's turn; its text is shown unless it is empty (a bare tool-call turn)."""
        self._messages.append(Message("assistant", reply.text, tool_calls=list(reply.tool_calls)))
        return self._show(Entry("assistant", reply.text)) if reply.text.strip() else None

    def add_proposal(self, card_id: str) -> Entry:
        return self._show(Entry("proposal", card_id=card_id))

    def add_tool_result(self, call: ToolCall, payload: dict, images: list[bytes], shown_text: str, ok: bool) -> Entry:
        """Feed a tool outcome (executed, failed or rejected) back to the model and show it."""
        self._messages.append(
            Message(
                "tool",
                json.dumps(payload, default=str),
                images=[ImageInput.from_png(data, f"{call.name}:{index}") for index, data in enumerate(images)],
                tool_call_id=call.id,
                tool_name=call.name,
                is_error=not ok,
                result=payload,
            )
        )
        return self._show(Entry("result", shown_text, images=list(images), ok=ok, data=payload))

    def add_answer(self, text: str, links: dict) -> Entry:
        return self._show(Entry("answer", text, data=links))

    def add_notice(self, text: str, ok: bool = True) -> Entry:
        """Status lines the model does not see (errors talking to the model, budget, cancellations)."""
        return self._show(Entry("notice", text, ok=ok))

    def _show(self, entry: Entry) -> Entry:
        self.entries.append(entry)
        return entry

"""The model-backed agent: each step is one provider request over the whole conversation."""

from __future__ import annotations

from ...providers import Provider
from ...providers.messages import Message, ModelReply
from .base import Agent


class ModelAgent(Agent):
    name = "model"

    def __init__(self, provider: Provider):
        self.provider = provider

    def step(self, conversation: list[Message], allow_tools: bool = True) -> ModelReply:
        return self.provider.complete(conversation, self.context.tools, allow_tools=allow_tools)

    def describe(self) -> dict:
        return {"name": self.name, "provider": self.provider.config.public()}

"""The model-backed agent: each step is one provider request over the whole conversation."""

from __future__ import annotations

from ...providers import Provider
from ...providers.messages import Message, ModelReply
from .base import Agent


class ModelAgent(Agent):
    """``name`` is "model" for viewer-native episodes and "montage" for the Track C slice-montage baseline
    (the same provider call; the runner gives the montage agent no tools and one turn)."""

    def __init__(self, provider: Provider, name: str = "model"):
        self.provider = provider
        self.name = name

    def step(self, conversation: list[Message], allow_tools: bool = True) -> ModelReply:
        return self.provider.complete(conversation, self.context.tools, allow_tools=allow_tools)

    def describe(self) -> dict:
        return {"name": self.name, "provider": self.provider.config.public()}

"""Model providers over plain ``requests``: OpenAI-compatible Chat Completions and Anthropic Messages."""

from __future__ import annotations

from .anthropic_messages import AnthropicProvider
from .base import Provider
from .config import ProviderConfig
from .http import ProviderError, RetryPolicy
from .messages import ImageInput, Message, ModelReply, ToolCall, Usage
from .openai_chat import OpenAIChatProvider

PROVIDERS: dict[str, type[Provider]] = {"openai": OpenAIChatProvider, "anthropic": AnthropicProvider}


def make_provider(config: ProviderConfig) -> Provider:
    return PROVIDERS[config.kind](config)


__all__ = [
    "AnthropicProvider",
    "ImageInput",
    "Message",
    "ModelReply",
    "OpenAIChatProvider",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "RetryPolicy",
    "ToolCall",
    "Usage",
    "make_provider",
]

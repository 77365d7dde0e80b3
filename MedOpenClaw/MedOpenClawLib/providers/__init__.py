"""Model providers: the neutral conversation (:mod:`.messages`), its policy and budget, and one wire class per API
format; the providers a run can name are declared in :mod:`.kinds`.

The names below are imported on first use (PEP 562), so the command line can read :mod:`.kinds` to build its
parser without loading the HTTP stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Provider
    from .config import ProviderConfig

_EXPORTS = {
    "AnthropicProvider": "anthropic_messages",
    "ImageInput": "messages",
    "Message": "messages",
    "ModelReply": "messages",
    "OpenAIChatProvider": "openai_chat",
    "Provider": "base",
    "ProviderConfig": "config",
    "ProviderError": "http",
    "RetryPolicy": "http",
    "ToolCall": "messages",
    "Usage": "messages",
}


def make_provider(config: ProviderConfig) -> Provider:
    """The wire class the config's provider kind declares, talking to its endpoint."""
    return config.provider_kind.provider_class()(config)


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)


__all__ = [*_EXPORTS, "make_provider"]

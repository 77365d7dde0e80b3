"""Anthropic Messages at api.anthropic.com (or an Anthropic-compatible server via --base-url)."""

from . import ProviderKind

KIND = ProviderKind(
    name="anthropic",
    summary="Anthropic Messages",
    wire="anthropic_messages:AnthropicProvider",
    default_url="https://api.anthropic.com",
    key_variables=("ANTHROPIC_API_KEY",),
    profile="anthropic",
    takes=frozenset({"temperature"}),  # the Messages API has no seed
    # the anthropic SDK refuses non-streaming requests expected to pass 10 minutes: max_tokens above 21,333
    stream_above=21_333,
)

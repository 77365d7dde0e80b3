"""OpenAI Chat Completions: OpenAI's own API and every OpenAI-compatible server (vLLM, Ollama, llama.cpp,
LM Studio, OpenRouter, LiteLLM, Mistral, Gemini's OpenAI endpoint)."""

from . import ProviderKind

KIND = ProviderKind(
    name="openai",
    summary="Chat Completions (OpenAI, or any OpenAI-compatible server via --base-url)",
    wire="openai_chat:OpenAIChatProvider",
    default_url="https://api.openai.com/v1",
    key_variables=("OPENAI_API_KEY",),
    token_limit_fields=("max_tokens", "max_completion_tokens"),  # reasoning models take only the second
)

"""OpenAI's Responses API (POST {base}/responses): the models and features offered only there."""

from . import ProviderKind

KIND = ProviderKind(
    name="openai-responses",
    summary="OpenAI Responses API (POST {base}/responses; --max-tokens is sent as max_output_tokens)",
    wire="openai_responses:OpenAIResponsesProvider",
    default_url="https://api.openai.com/v1",
    key_variables=("OPENAI_API_KEY",),
    takes=frozenset({"temperature"}),  # no seed
    token_limit_fields=("max_tokens", "max_completion_tokens"),
)

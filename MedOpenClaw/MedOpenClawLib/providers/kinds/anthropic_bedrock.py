"""Anthropic Messages on Amazon Bedrock (InvokeModel, SigV4 with the AWS credential chain, --region)."""

from . import ProviderKind

KIND = ProviderKind(
    name="anthropic-bedrock",
    summary="Claude on Amazon Bedrock (--region; AWS credentials; pip install 'medopenclaw[bedrock]')",
    wire="anthropic_clouds:AnthropicBedrockProvider",
    default_url="https://bedrock-runtime.{region}.amazonaws.com",
    profile="anthropic",
    takes=frozenset({"temperature"}),
    needs=("region",),
    auth="sigv4",
    stream_above=21_333,  # as the Messages API (kinds/anthropic.py); InvokeModelWithResponseStream
)

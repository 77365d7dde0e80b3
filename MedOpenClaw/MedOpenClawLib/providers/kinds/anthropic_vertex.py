"""Anthropic Messages on Google Vertex AI (rawPredict, --project, --region, an access token or ADC)."""

from . import ProviderKind

KIND = ProviderKind(
    name="anthropic-vertex",
    summary="Claude on Google Vertex AI (--project, --region; MEDOPENCLAW_API_KEY access token or "
            "'medopenclaw[vertex]' for Google's default credentials)",
    wire="anthropic_clouds:AnthropicVertexProvider",
    default_url="https://{region_prefix}aiplatform.googleapis.com",
    profile="anthropic",
    takes=frozenset({"temperature"}),
    needs=("project", "region"),
    auth="google",
    stream_above=21_333,  # as the Messages API (kinds/anthropic.py)
)

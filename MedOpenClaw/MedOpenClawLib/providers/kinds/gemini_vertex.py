"""Gemini on Google Vertex AI (generateContent of publishers/google models, --project, --region, an access token
or ADC)."""

from . import ProviderKind

KIND = ProviderKind(
    name="gemini-vertex",
    summary="Gemini on Google Vertex AI (--project, --region; MEDOPENCLAW_API_KEY access token, else Google's "
            "default credentials)",
    wire="gemini:GeminiVertexProvider",
    default_url="https://{region_prefix}aiplatform.googleapis.com",
    profile="gemini",
    takes=frozenset({"temperature", "seed"}),
    needs=("project", "region"),
    auth="google",  # google-genai loads Application Default Credentials itself (google-auth is its dependency)
)

"""Gemini's native API (generateContent at generativelanguage.googleapis.com, the key in x-goog-api-key)."""

from . import ProviderKind

KIND = ProviderKind(
    name="gemini",
    summary="Gemini API (POST {base}/v1beta/models/{model}:generateContent; --stream: streamGenerateContent)",
    wire="gemini:GeminiProvider",
    default_url="https://generativelanguage.googleapis.com",
    key_variables=("GOOGLE_API_KEY", "GEMINI_API_KEY"),  # google-genai's order: GOOGLE_API_KEY wins
    profile="gemini",
    takes=frozenset({"temperature", "seed"}),  # generationConfig.temperature, generationConfig.seed
)

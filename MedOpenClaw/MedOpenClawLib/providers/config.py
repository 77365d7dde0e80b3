"""Provider configuration from command-line flags or ``MEDOPENCLAW_*`` environment variables.

The API key lives only here, is excluded from ``repr`` and from :meth:`ProviderConfig.public`, which is the
form written to run manifests and traces.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .http import RetryPolicy

PROVIDER_KINDS = ("openai", "anthropic")
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
ENV_PREFIX = "MEDOPENCLAW_"


@dataclass
class ProviderConfig:
    kind: str
    model: str
    base_url: str
    api_key: str = field(default="", repr=False)
    temperature: float | None = 0.0
    seed: int | None = None
    max_tokens: int = 2048
    timeout_s: float = 120.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def __post_init__(self):
        if self.kind not in PROVIDER_KINDS:
            raise ValueError(f"provider must be one of {PROVIDER_KINDS}, got {self.kind!r}")
        if not self.model:
            raise ValueError(f"a model name is required (--model or {ENV_PREFIX}MODEL)")
        self.base_url = self.base_url.rstrip("/")

    def public(self) -> dict:
        """Everything but the key: safe for manifests, traces and logs."""
        return {
            "kind": self.kind,
            "model": self.model,
            "base_url": self.base_url,
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "timeout_s": self.timeout_s,
            "max_retries": self.retry.max_retries,
        }

    @classmethod
    def resolve(
        cls,
        model: str | None = None,
        provider: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        environ: dict | None = None,
        **options,
    ) -> ProviderConfig:
        """Flags win over ``MEDOPENCLAW_{MODEL,PROVIDER,BASE_URL,API_KEY}``; the provider defaults to
        ``anthropic`` for ``claude*`` models and to the OpenAI-compatible protocol otherwise."""
        env = os.environ if environ is None else environ
        model = model or env.get(ENV_PREFIX + "MODEL", "")
        kind = (
            provider
            or env.get(ENV_PREFIX + "PROVIDER")
            or ("anthropic" if model.lower().startswith("claude") else "openai")
        )
        base_url = base_url or env.get(ENV_PREFIX + "BASE_URL") or DEFAULT_BASE_URLS.get(kind, "")
        api_key = api_key if api_key is not None else env.get(ENV_PREFIX + "API_KEY", "")
        return cls(kind=kind, model=model, base_url=base_url, api_key=api_key, **options)

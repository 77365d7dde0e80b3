"""Provider configuration from command-line flags or ``MEDOPENCLAW_*`` environment variables.

The API key lives only here, is excluded from ``repr`` and from :meth:`ProviderConfig.public`, which is the
form written to run manifests and traces.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..core import settings
from ..core.redaction import redact_url, redact_value
from .conversation import DEFAULT_IMAGE_HISTORY, DEFAULT_TOOL_HISTORY, ConversationPolicy
from .http import RetryPolicy
from .kinds import ProviderKind, provider_kind
from .limits import PROFILE_NAMES, ServerLimits, detect_profile, resolve_limits
from .pricing import Price

ENV_PREFIX = "MEDOPENCLAW_"


def thinking_budget(extra_body: object) -> int:
    """The largest thinking budget an extra body declares (Anthropic ``thinking.budget_tokens``, Gemini's and
    Qwen's ``thinking_budget``, Gemini's native ``thinkingConfig.thinkingBudget``); 0 without one."""
    stack, budget = [extra_body], 0
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key in ("budget_tokens", "thinking_budget", "thinkingBudget") and isinstance(value, int) and \
                        not isinstance(value, bool):
                    budget = max(budget, value)
                else:
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return budget


@dataclass
class ProviderConfig:
    kind: str
    model: str
    base_url: str
    api_key: str = field(default="", repr=False)
    temperature: float | None = None  # None: the server's default (reasoning models reject any other)
    seed: int | None = None
    max_tokens: int = 2048
    token_limit_field: str = "max_tokens"  # OpenAI-compatible: or "max_completion_tokens"
    extra_body: dict = field(default_factory=dict)  # server-specific request fields (vLLM, Ollama, OpenRouter)
    timeout_s: float = 120.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    price: Price | None = None
    image_history: int | None = DEFAULT_IMAGE_HISTORY  # images a request carries (None: all), see conversation
    tool_history: int | None = DEFAULT_TOOL_HISTORY  # rounds whose tool outputs a request carries whole (None: all)
    context_window: int | None = None  # tokens; None: the profile's documented window (or what the server reports)
    profile: str | None = None  # a limits.PROFILES name; None: detected from kind, URL and model
    api_version: str | None = None  # azure-openai: the ?api-version= of every request
    region: str | None = None  # anthropic-bedrock, anthropic-vertex, gemini-vertex: the cloud region
    project: str | None = None  # anthropic-vertex, gemini-vertex: the Google Cloud project
    stream: bool | None = None  # --stream; None: the kind's rule (ProviderKind.stream_above)

    def __post_init__(self):
        kind = provider_kind(self.kind)
        if not self.model:
            raise ValueError(f"a model name is required (--model or {ENV_PREFIX}MODEL)")
        for name in kind.needs:
            if not getattr(self, name):
                raise ValueError(f"the {kind.name} provider needs --{name.replace('_', '-')}")
        if not self.base_url:
            raise ValueError(f"the {kind.name} provider needs --base-url (or {ENV_PREFIX}BASE_URL)")
        if self.stream is None and isinstance(self.extra_body, dict) and self.extra_body.get("stream") is True:
            self.stream = True  # asked for in the extra body: the replies are then event streams to assemble
        if self.stream and not kind.streams:
            raise ValueError(f"the {kind.name} provider does not speak --stream")
        if self.token_limit_field not in kind.token_limit_fields:
            raise ValueError(f"the {kind.name} provider takes {' or '.join(kind.token_limit_fields)} as its output "
                             f"limit, not {self.token_limit_field}")
        if not isinstance(self.extra_body, dict):
            raise ValueError("extra body must be a JSON object")
        if thinking_budget(self.extra_body) >= self.max_tokens:
            raise ValueError(f"max tokens ({self.max_tokens}) must exceed the thinking budget "
                             f"({thinking_budget(self.extra_body)}) declared in the extra body")
        for name in ("image_history", "tool_history"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more (or None for all)")
        if self.context_window is not None and self.context_window <= self.max_tokens:
            raise ValueError(f"the context window ({self.context_window} tokens) must exceed max_tokens "
                             f"({self.max_tokens})")
        self.base_url = self.base_url.rstrip("/")
        self.profile = self.profile or kind.profile or detect_profile(self.base_url, self.model)
        if self.profile not in PROFILE_NAMES:
            raise ValueError(f"server profile must be one of {', '.join(PROFILE_NAMES)}, got {self.profile!r}")

    @property
    def provider_kind(self) -> ProviderKind:
        return provider_kind(self.kind)

    def key_hint(self) -> str:
        return self.provider_kind.key_hint(self.base_url, self.region)

    def vendor_url(self) -> bool:
        return self.provider_kind.is_vendor_url(self.base_url, self.region)

    def limits(self) -> ServerLimits:
        return resolve_limits(self.profile, self.context_window)

    def policy(self) -> ConversationPolicy:
        return ConversationPolicy(self.image_history, tool_history=self.tool_history)

    def conversation(self) -> dict:
        """The conversation policy and the limits it is held to: result-changing, so part of the identity."""
        limits = self.limits()
        return {**self.policy().to_json(), "profile": self.profile, "context_window": limits.context_window}

    def request_body(self, body: dict) -> dict:
        """The vendor body with the server-specific fields merged in (they may override defaults)."""
        return {**body, **self.extra_body}

    def identity(self) -> dict:
        """What changes a run's results: a resumed run must match it (timeouts and retries may differ)."""
        keys = ("kind", "model", "temperature", "seed", "max_tokens", "token_limit_field")
        return {**{key: getattr(self, key) for key in keys}, **self._redacted(), "conversation": self.conversation()}

    def _redacted(self) -> dict:
        """The base URL and extra body as they may be written anywhere (:mod:`..redaction`: URL credentials,
        secret query parameters, secret-named fields of the extra body)."""
        return {"base_url": redact_url(self.base_url), "extra_body": redact_value(self.extra_body, (self.api_key,))}

    def public(self) -> dict:
        """Everything but the key: safe for manifests, traces and logs."""
        return {
            "kind": self.kind,
            "model": self.model,
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "token_limit_field": self.token_limit_field,
            **self._redacted(),
            "timeout_s": self.timeout_s,
            **{name: getattr(self, name) for name in ("api_version", "region", "project") if getattr(self, name)},
            "stream": self.stream,
            "max_retries": self.retry.max_retries,
            "retry_deadline_s": self.retry.deadline_s,
            "conversation": self.conversation(),
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
        ``anthropic`` for ``claude*`` models and to the OpenAI-compatible protocol otherwise. Without
        ``MEDOPENCLAW_API_KEY``, the kind's own key variables (``OPENAI_API_KEY``, ...: :mod:`.kinds`) supply the
        key when the requests go to that vendor's own API (a vendor key is never sent to another server)."""
        env = os.environ if environ is None else environ
        model = model or settings.value(ENV_PREFIX + "MODEL", env)
        kind = (
            provider
            or settings.value(ENV_PREFIX + "PROVIDER", env)
            or ("anthropic" if model.lower().startswith("claude") else "openai")
        )
        declared = provider_kind(kind)
        base_url = base_url or settings.value(ENV_PREFIX + "BASE_URL", env) or declared.endpoint(options.get("region"))
        if api_key is None:
            api_key = settings.value(ENV_PREFIX + "API_KEY", env)
            if not api_key and declared.is_vendor_url(base_url, options.get("region")):
                api_key = next((env[name] for name in declared.key_variables if env.get(name)), "")
        return cls(kind=kind, model=model, base_url=base_url, api_key=api_key, **options)

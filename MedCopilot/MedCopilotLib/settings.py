"""Copilot settings: model endpoint, model name, provider kind and API key.

The key comes from the environment (``MEDOPENCLAW_API_KEY``) or, when the user ticks "remember", from the
application settings (Slicer's QSettings). It is never part of ``repr``, of :meth:`CopilotSettings.describe`
(what the panel and the audit trace show), or of any exception message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlparse

from MedOpenClawLib.core.settings import value
from MedOpenClawLib.providers import ProviderConfig
from MedOpenClawLib.providers.kinds import KINDS

ENV_BASE_URL = "MEDOPENCLAW_BASE_URL"
ENV_MODEL = "MEDOPENCLAW_MODEL"
ENV_API_KEY = "MEDOPENCLAW_API_KEY"
ENV_PROVIDER = "MEDOPENCLAW_PROVIDER"
SETTINGS_PREFIX = "MedCopilot/"
PROVIDERS = tuple(name for name, kind in KINDS.items() if not kind.needs)  # no fields for region, project, version
DEFAULT_BASE_URL = KINDS["openai"].default_url


class SettingsStore(Protocol):
    """Persistent key/value settings (QSettings inside Slicer, a dict in tests)."""

    def value(self, key: str) -> str | None: ...

    def set_value(self, key: str, value: str) -> None: ...

    def remove(self, key: str) -> None: ...


class DictSettingsStore:
    def __init__(self, values: dict | None = None):
        self.values = dict(values or {})

    def value(self, key: str) -> str | None:
        return self.values.get(key)

    def set_value(self, key: str, value: str) -> None:
        self.values[key] = value

    def remove(self, key: str) -> None:
        self.values.pop(key, None)


@dataclass
class CopilotSettings:
    base_url: str = DEFAULT_BASE_URL
    model: str = ""
    provider: str = "openai"
    api_key: str = field(default="", repr=False)
    key_source: str = "none"  # environment | settings | entered | none
    timeout_s: float = 120.0

    def validate(self) -> list[str]:
        """Problems that stop a model call, worded for the settings box (never containing the key)."""
        problems = []
        parsed = urlparse(self.base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            problems.append(f"endpoint must be an http(s) URL, got {self.base_url!r}")
        if not self.model.strip():
            problems.append("choose a model name")
        if self.provider not in PROVIDERS:
            problems.append(f"provider must be one of {', '.join(PROVIDERS)}")
        if self.timeout_s <= 0:
            problems.append("timeout must be positive")
        return problems

    def provider_config(self) -> ProviderConfig:
        """The providers' configuration (their ``ProviderConfig`` keeps the key out of its repr as well)."""
        return ProviderConfig(kind=self.provider, model=self.model, base_url=self.base_url, api_key=self.api_key,
                              timeout_s=self.timeout_s)

    def describe(self) -> dict:
        """What may be shown or logged."""
        return {
            "base_url": self.base_url,
            "model": self.model,
            "provider": self.provider,
            "api_key": "set" if self.api_key else "not set",
            "key_source": self.key_source,
            "timeout_s": self.timeout_s,
        }


def load_settings(store: SettingsStore, environ: Mapping[str, str] | None = None) -> CopilotSettings:
    """Environment first (what a launcher or CI sets), then the saved settings, then defaults."""
    environ = os.environ if environ is None else environ

    def pick(env_name: str, key: str, default: str) -> str:
        return value(env_name, environ) or store.value(SETTINGS_PREFIX + key) or default

    provider = pick(ENV_PROVIDER, "provider", "openai")
    settings = CopilotSettings(
        base_url=pick(ENV_BASE_URL, "base_url", KINDS[provider].default_url if provider in KINDS else DEFAULT_BASE_URL),
        model=pick(ENV_MODEL, "model", ""),
        provider=provider,
    )
    timeout = store.value(SETTINGS_PREFIX + "timeout_s")
    if timeout:
        try:
            settings.timeout_s = float(timeout)
        except ValueError:
            pass  # a hand-edited settings file must not stop the panel from opening
    if value(ENV_API_KEY, environ):
        settings.api_key, settings.key_source = value(ENV_API_KEY, environ), "environment"
    elif store.value(SETTINGS_PREFIX + "api_key"):
        settings.api_key, settings.key_source = store.value(SETTINGS_PREFIX + "api_key"), "settings"
    return settings


def save_settings(settings: CopilotSettings, store: SettingsStore, remember_key: bool) -> None:
    """Persist the non-secret fields; the key only when the user asked to remember it (and never an env key)."""
    store.set_value(SETTINGS_PREFIX + "base_url", settings.base_url)
    store.set_value(SETTINGS_PREFIX + "model", settings.model)
    store.set_value(SETTINGS_PREFIX + "provider", settings.provider)
    store.set_value(SETTINGS_PREFIX + "timeout_s", str(settings.timeout_s))
    if remember_key and settings.api_key and settings.key_source != "environment":
        store.set_value(SETTINGS_PREFIX + "api_key", settings.api_key)
    elif not remember_key:
        store.remove(SETTINGS_PREFIX + "api_key")

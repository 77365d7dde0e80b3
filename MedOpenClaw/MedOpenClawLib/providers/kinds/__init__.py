"""The model providers a run can name, one file each in this package declaring its :class:`ProviderKind`.

Everything that lists providers -- ``--provider``'s choices and help, ``MEDOPENCLAW_PROVIDER``'s description, the
key variables read, the default endpoint, the limits profile, the pre-flight's hints, MedCopilot's choices --
reads these declarations, so a provider is added by adding one file here. Importing this package is cheap (no
HTTP stack): the command line builds its parser from it; the wire class is imported only when a provider is made.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass


@dataclass(frozen=True)
class ProviderKind:
    """One way of reaching models: a wire format at a default endpoint, with the vendor's own key variables."""

    name: str  # the --provider value
    summary: str  # one line for --help and the README
    wire: str  # "module:Class" of the Provider subclass in MedOpenClawLib.providers
    default_url: str  # the endpoint root (--base-url overrides it)
    key_variables: tuple[str, ...] = ()  # the vendor's own key variables, read only for requests to default_url
    profile: str | None = None  # limits.PROFILES name; None: detected from the URL and the model name
    takes: frozenset[str] = frozenset({"temperature", "seed"})  # sampling parameters the API accepts
    token_limit_fields: tuple[str, ...] = ("max_tokens",)  # the output-limit fields the API accepts

    def provider_class(self) -> type:
        module, name = self.wire.split(":")
        return getattr(importlib.import_module(f"..{module}", __name__), name)

    def key_hint(self, base_url: str) -> str:
        """Which variables would supply the key for requests to ``base_url`` (for error messages)."""
        vendor = self.key_variables if base_url == self.default_url else ()
        return " or ".join(("MEDOPENCLAW_API_KEY", *vendor))


def _declared() -> dict[str, ProviderKind]:
    kinds = [importlib.import_module(f"{__name__}.{module.name}").KIND for module in pkgutil.iter_modules(__path__)]
    return {kind.name: kind for kind in sorted(kinds, key=lambda kind: kind.name)}


KINDS: dict[str, ProviderKind] = _declared()


def provider_kind(name: str) -> ProviderKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"provider must be one of {', '.join(KINDS)}, got {name!r}") from None

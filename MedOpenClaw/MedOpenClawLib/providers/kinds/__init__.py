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
from urllib.parse import urlparse


@dataclass(frozen=True)
class ProviderKind:
    """One way of reaching models: a wire format at a default endpoint, with the vendor's own key variables."""

    name: str  # the --provider value
    summary: str  # one line for --help and the README
    wire: str  # "module:Class" of the Provider subclass in MedOpenClawLib.providers
    # the endpoint root (--base-url overrides it); "{region}" / "{region_prefix}" are filled from --region; "" means
    # the user's own resource must be named with --base-url
    default_url: str = ""
    key_variables: tuple[str, ...] = ()  # the vendor's own key variables, read only for requests to the vendor
    vendor_hosts: tuple[str, ...] = ()  # host suffixes that are the vendor's own API too (Azure resources)
    profile: str | None = None  # limits.PROFILES name; None: detected from the URL and the model name
    takes: frozenset[str] = frozenset({"temperature", "seed"})  # sampling parameters the API accepts
    token_limit_fields: tuple[str, ...] = ("max_tokens",)  # the output-limit fields the API accepts
    needs: tuple[str, ...] = ()  # ProviderConfig fields the endpoint cannot do without (api_version, region, ...)
    auth: str = "key"  # "key" (sent by the wire class), "sigv4" (AWS credentials), "google" (key or ADC token)
    streams: bool = True  # --stream is spoken (the wire's server-sent events)
    stream_above: int | None = None  # streamed by default when max_tokens exceeds this (the vendor requires it)

    def provider_class(self) -> type:
        module, name = self.wire.split(":")
        return getattr(importlib.import_module(f"..{module}", __name__), name)

    def endpoint(self, region: str | None = None) -> str:
        """The default endpoint root, for ``region`` where it depends on one ("" when there is none)."""
        if "{" in self.default_url and not region:
            return ""
        return self.default_url.format(region=region, region_prefix="" if region == "global" else f"{region}-")

    def is_vendor_url(self, base_url: str, region: str | None = None) -> bool:
        """Requests to ``base_url`` go to this vendor's own API (its key variables may be read for them)."""
        host = urlparse(base_url).hostname or ""
        return (bool(base_url) and base_url == self.endpoint(region)) or \
            any(host.endswith(suffix) for suffix in self.vendor_hosts)

    def key_hint(self, base_url: str, region: str | None = None) -> str:
        """Which variables would supply the key for requests to ``base_url`` (for error messages)."""
        vendor = self.key_variables if self.is_vendor_url(base_url, region) else ()
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

"""Each provider is one declaration (providers/kinds/): the command line, the settings table, MedCopilot and the
configuration read only those."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from MedOpenClawLib.bench.run_command import add_bench_subcommand
from MedOpenClawLib.providers import Provider, ProviderConfig, make_provider
from MedOpenClawLib.providers.kinds import KINDS
from MedOpenClawLib.providers.limits import PROFILE_NAMES

CLOUD_OPTIONS = {"api_version": "2024-10-21", "region": "us-east-1", "project": "p"}


def options_for(kind) -> dict:
    """What the kind needs, and the vendor's own endpoint (a resource of the user's for Azure)."""
    vendor = kind.endpoint("us-east-1") or f"https://resource{kind.vendor_hosts[0]}"
    return {"base_url": vendor, **{name: CLOUD_OPTIONS[name] for name in kind.needs}}


def test_every_declared_kind_is_complete_and_reachable_from_the_command_line():
    parser = argparse.ArgumentParser()
    add_bench_subcommand(parser.add_subparsers())
    run = parser._subparsers._group_actions[0].choices["run"]  # noqa: SLF001 - argparse has no public accessor
    (action,) = [a for a in run._actions if a.dest == "provider"]  # noqa: SLF001
    assert tuple(action.choices) == tuple(KINDS) and all(kind.summary in action.help for kind in KINDS.values())
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    described = {line.split("`")[1]: line for line in readme.splitlines() if line.startswith("| `MEDOPENCLAW_")}
    for kind in KINDS.values():
        assert issubclass(kind.provider_class(), Provider)
        assert kind.profile is None or kind.profile in PROFILE_NAMES
        assert kind.name in described["MEDOPENCLAW_PROVIDER"]
        assert all(name in described["MEDOPENCLAW_API_KEY"] for name in kind.key_variables)
        options = options_for(kind)
        config = ProviderConfig.resolve(model="m", provider=kind.name, environ={}, **options)
        assert config.vendor_url() and isinstance(make_provider(config), kind.provider_class())


@pytest.mark.parametrize("name", list(KINDS))
def test_vendor_keys_go_only_to_the_vendors_own_endpoint(name):
    kind = KINDS[name]
    environ = {variable: f"key-{variable}" for variable in kind.key_variables}
    options = options_for(kind)
    own = ProviderConfig.resolve(model="m", provider=name, environ=environ, **options)
    other = ProviderConfig.resolve(model="m", provider=name, environ=environ,
                                   **{**options, "base_url": "http://127.0.0.1:9/v1"})
    assert own.api_key == (f"key-{kind.key_variables[0]}" if kind.key_variables else "")
    assert other.api_key == "" and other.key_hint() == "MEDOPENCLAW_API_KEY"


def test_an_unknown_kind_or_output_limit_field_is_refused_in_one_line():
    with pytest.raises(ValueError, match="provider must be one of anthropic, .*, got 'gpt'"):
        ProviderConfig(kind="gpt", model="m", base_url="http://x")
    with pytest.raises(ValueError, match="takes max_tokens"):
        ProviderConfig(kind="anthropic", model="m", base_url="http://x", token_limit_field="max_completion_tokens")

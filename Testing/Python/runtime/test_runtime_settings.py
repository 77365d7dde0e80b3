"""One settings module reads every MEDOPENCLAW_* variable: no other file reads one from the environment, every
name the code mentions is declared there, secrets are redacted, and the README table is generated from it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from MedOpenClawLib.core import settings
from MedOpenClawLib.core.provenance import environment_secrets

ROOT = Path(__file__).resolve().parents[3]
SOURCES = [path for package in ("MedOpenClaw", "MedCopilot") for path in (ROOT / package).rglob("*.py")]
READS = re.compile(r"environ(\.get)?\s*[\(\[]|getenv\(|\bin\s+os\.environ")  # a read of the process environment
NAME = re.compile(r"MEDOPENCLAW_[A-Z0-9_]*[A-Z0-9]")
NOT_VARIABLES = {"MEDOPENCLAW_BRIDGE_PORT"}  # the QuPath bridge's stdout marker line, not an environment variable


def test_only_the_settings_module_reads_medopenclaw_variables():
    offenders = []
    for path in SOURCES:
        if path.name == "settings.py" and path.parent.name == "core":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "MEDOPENCLAW_" in line and READS.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_every_name_the_code_mentions_is_declared():
    mentioned = {name for path in SOURCES for name in NAME.findall(path.read_text(encoding="utf-8"))}
    assert mentioned - NOT_VARIABLES - set(settings.BY_NAME) == set()


def test_values_are_read_through_one_function(monkeypatch):
    monkeypatch.setenv("MEDOPENCLAW_CACHE", "  /tmp/cohort  ")
    assert settings.value("MEDOPENCLAW_CACHE") == "/tmp/cohort" and settings.is_set("MEDOPENCLAW_CACHE")
    assert settings.value("MEDOPENCLAW_CACHE", {}) == "" and not settings.is_set("MEDOPENCLAW_TOKEN", {})
    with pytest.raises(KeyError, match="not a declared"):
        settings.value("MEDOPENCLAW_UNDECLARED")


def test_every_secret_setting_is_redacted_from_provenance(monkeypatch):
    for setting in settings.SETTINGS:
        monkeypatch.setenv(setting.name, f"value-of-{setting.name}")
    secrets = set(environment_secrets())
    assert {f"value-of-{s.name}" for s in settings.SETTINGS if s.secret} <= secrets
    assert not {f"value-of-{s.name}" for s in settings.SETTINGS if not s.secret} & secrets


def test_readme_table_is_generated_from_the_settings():
    script = ROOT / "scripts" / "update_readme_settings.py"
    spec = importlib.util.spec_from_file_location("update_readme_settings", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert module.render(text) == text, "README settings table stale: run python scripts/update_readme_settings.py"

"""Every ``MEDOPENCLAW_*`` environment variable the library reads, declared once, and the one function that reads
them: a variable not declared here cannot be read (``KeyError``), so the README table generated from
:data:`SETTINGS` (``python scripts/update_readme_settings.py``) lists all of them.

The variables a parent process sets for a child it starts (the worker and QuPath bridge tokens) are read through
:func:`value` too; writing them stays with the code that starts the child, which names them by
:attr:`Setting.name`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    name: str
    # "{providers}" / "{vendor_keys}" stand for the provider kinds' names and key variables, which live above
    # core (providers/kinds): whoever shows the description fills them in (:func:`markdown_table`)
    description: str
    default: str = ""  # what an unset (or empty) variable means, as the README shows it
    secret: bool = False  # never printed, logged or written to a trace


SETTINGS = (
    Setting("MEDOPENCLAW_API_KEY", "the model key for any server (vendor keys {vendor_keys} are used only for "
            "requests to that vendor's own API)", secret=True),
    Setting("MEDOPENCLAW_MODEL", "model name, for `--model` (bench run, MedCopilot)"),
    Setting("MEDOPENCLAW_PROVIDER", "the model API, for `--provider`: {providers}",
            "anthropic for claude-* models, else openai"),
    Setting("MEDOPENCLAW_BASE_URL", "API base URL, for `--base-url`", "the provider's public API"),
    Setting("MEDOPENCLAW_TOKEN", "bearer token of `serve`, `mcp --transport http` and the in-Slicer server",
            "generated and printed at start", secret=True),
    Setting("MEDOPENCLAW_CACHE", "where `bench run` caches the synthetic cohort", "~/.cache/medopenclaw"),
    Setting("MEDOPENCLAW_COHORT_CASES", "cases per module of the cached synthetic cohort (`bench run` without "
            "`--cases`, `bench cohort --cache`), for `--cohort-cases`", "the size's: 6 demo, 40 full"),
    Setting("MEDOPENCLAW_VISTA3D_BUNDLE", "MONAI VISTA3D bundle folder whose models/model.pt `vista3d_segment` "
            "loads", "the operator says how to set it"),
    Setting("MEDOPENCLAW_BRIDGE_JAR", "a built QuPath bridge jar", "built from MedOpenClaw/QuPathBridge"),
    Setting("MEDOPENCLAW_DEBUG", "any value: tracebacks instead of one-line errors", "one-line errors"),
    Setting("MEDOPENCLAW_WORKER_TOKEN", "set by `bench run` for each worker it starts (never argv)", secret=True),
    Setting("MEDOPENCLAW_BRIDGE_TOKEN", "set for the QuPath bridge process it starts", secret=True),
)
BY_NAME = {setting.name: setting for setting in SETTINGS}


def value(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The variable's value with surrounding blanks removed ("" when unset); ``environ`` replaces the process
    environment (tests, a child's environment). Undeclared names raise KeyError."""
    if name not in BY_NAME:
        raise KeyError(f"{name} is not a declared MedOpenClaw setting (MedOpenClawLib/core/settings.py)")
    return (os.environ if environ is None else environ).get(name, "").strip()


def is_set(name: str, environ: Mapping[str, str] | None = None) -> bool:
    return bool(value(name, environ))


def markdown_table(providers: Sequence[str], vendor_keys: Sequence[str]) -> str:
    """The README's settings table, the descriptions naming the provider kinds and their vendors' key variables."""
    lines = ["| variable | what it sets | unset |", "| --- | --- | --- |"]
    for setting in SETTINGS:
        secret = " (secret: never logged)" if setting.secret else ""
        description = setting.description.format(providers=", ".join(providers), vendor_keys=" / ".join(vendor_keys))
        lines.append(f"| `{setting.name}` | {description}{secret} | {setting.default or '—'} |")
    return "\n".join(lines)

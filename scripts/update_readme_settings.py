"""Rewrite the README's settings table (between ``<!-- settings -->`` and ``<!-- /settings -->``) from
MedOpenClawLib.core.settings.SETTINGS; Testing/Python/runtime/test_runtime_settings.py fails while it is stale."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "MedOpenClaw"))

from MedOpenClawLib.core.settings import markdown_table  # noqa: E402
from MedOpenClawLib.providers.kinds import KINDS  # noqa: E402

README = ROOT / "README.md"
SECTION = re.compile(r"(<!-- settings -->\n).*?(<!-- /settings -->)", re.S)


def settings_table() -> str:
    """The table, its descriptions naming every declared provider kind and its vendor's key variables."""
    return markdown_table(list(KINDS), [name for kind in KINDS.values() for name in kind.key_variables])


def render(text: str) -> str:
    if not SECTION.search(text):
        raise SystemExit("README.md has no <!-- settings --> ... <!-- /settings --> section")
    return SECTION.sub(lambda match: match.group(1) + settings_table() + "\n" + match.group(2), text)


if __name__ == "__main__":
    README.write_text(render(README.read_text(encoding="utf-8")), encoding="utf-8")

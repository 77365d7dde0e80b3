"""Regenerate the README's tool tables from the registry (the test suite fails when they are stale)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from MedOpenClawLib.server.commands import tools_markdown

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = re.compile(r"(<!-- tools:(?P<track>[AB]) -->\n)(?:(?!<!-- ).)*(<!-- /tools -->)", re.S)


def section(match: re.Match) -> str:
    track = match.group("track")
    return match.group(1) + tools_markdown(track, exclusive=track == "B") + "\n" + match.group(3)


def render(text: str) -> str:
    """Track A lists every tool; the Track B table lists only what Track B adds."""
    return SECTION.sub(section, text)


if __name__ == "__main__":
    README.write_text(render(README.read_text()))
    sys.exit(0)

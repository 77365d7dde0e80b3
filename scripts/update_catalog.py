"""Regenerate the action catalog (MedOpenClawLib/resources/actions.json) and the README's tool tables from the
toolsets; the test suite fails when either is stale."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from MedOpenClawLib import apps
from MedOpenClawLib.core.formats import markdown_table

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = re.compile(r"(?P<start><!-- tools:(?P<application>[a-z]+):(?P<track>[AB]) -->\n)(?:(?!<!-- ).)*"
                     r"(?P<end><!-- /tools -->)", re.S)


def catalog_text(entries: list[dict]) -> str:
    return json.dumps(entries, indent=1, ensure_ascii=False) + "\n"


def render(text: str, entries: list[dict]) -> str:
    """Each ``<!-- tools:APPLICATION:TRACK -->`` section lists that application's tools on TRACK; a Track B
    radiology section lists only what Track B adds."""

    def section(match: re.Match) -> str:
        application, track = match.group("application"), match.group("track")
        rows = [entry for entry in entries if entry["application"] == application and track in entry["tracks"]
                and not (track == "B" and application == "radiology" and "A" in entry["tracks"])]
        return match.group("start") + markdown_table(rows) + "\n" + match.group("end")

    return SECTION.sub(section, text)


if __name__ == "__main__":
    generated = apps.generate()
    apps.CATALOG_PATH.write_text(catalog_text(generated), encoding="utf-8")
    README.write_text(render(README.read_text(encoding="utf-8"), generated), encoding="utf-8")
    sys.exit(0)

"""The README's first lines are the two set-up commands, and its tool tables and the action catalog
(resources/actions.json) are generated from the toolsets."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from MedOpenClawLib import apps

ROOT = Path(__file__).resolve().parents[3]


def test_readme_starts_with_the_two_commands():
    lines = [line for line in (ROOT / "README.md").read_text().splitlines() if line.strip()]
    assert lines[1] == "```bash"
    assert lines[2].startswith("bash scripts/demo.sh") and lines[3].startswith("bash scripts/test.sh")
    assert lines[4] == "```"


def test_catalog_and_readme_tool_tables_are_generated_from_the_toolsets():
    spec = importlib.util.spec_from_file_location("update_catalog", ROOT / "scripts" / "update_catalog.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generated = apps.generate()
    stale = "stale: run python scripts/update_catalog.py"
    assert module.catalog_text(generated) == apps.CATALOG_PATH.read_text(encoding="utf-8"), f"catalog {stale}"
    text = (ROOT / "README.md").read_text()
    sections = [match.group("application", "track") for match in module.SECTION.finditer(text)]
    assert sections == [("radiology", "A"), ("radiology", "B"), ("pathology", "A")], "README lost a tools marker"
    assert module.render(text, generated) == text, f"README tool tables {stale}"

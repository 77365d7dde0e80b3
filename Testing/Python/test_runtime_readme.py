"""The README's first lines are the two set-up commands and its tool tables match the registry."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_starts_with_the_two_commands():
    lines = [line for line in (ROOT / "README.md").read_text().splitlines() if line.strip()]
    assert lines[1] == "```bash"
    assert lines[2].startswith("bash scripts/demo.sh") and lines[3].startswith("bash scripts/test.sh")
    assert lines[4] == "```"


def test_readme_tool_tables_are_generated_from_the_registry():
    spec = importlib.util.spec_from_file_location("update_readme_tools", ROOT / "scripts" / "update_readme_tools.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (ROOT / "README.md").read_text()
    assert "<!-- tools:A -->" in text
    assert module.render(text) == text, "README tool tables are stale: run python scripts/update_readme_tools.py"

"""The report package has no import circles: every module's imports (module- or function-level) of other report
modules form a graph without cycles, so each can be read, tested and moved on its own."""

from __future__ import annotations

import ast
from pathlib import Path

import MedOpenClawLib.bench.report as report

ROOT = Path(report.__file__).parent
PACKAGE = "MedOpenClawLib.bench.report"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join([PACKAGE, *parts[:-1]] + ([] if parts[-1] == "__init__" else [parts[-1]]))


def imports(path: Path, known: set[str]) -> set[str]:
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[:len(package.split(".")) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
            found |= {f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target
                      for alias in node.names} & known
    return found - {name}


def test_report_modules_import_each_other_without_circles():
    paths = sorted(ROOT.rglob("*.py"))
    known = {module_name(path) for path in paths}
    graph = {module_name(path): imports(path, known) for path in paths}
    state: dict[str, str] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for target in sorted(graph[node]):
            assert state.get(target) != "open", " -> ".join([*trail, node, target])
            if target not in state:
                visit(target, [*trail, node])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert f"{PACKAGE}.tables.table1" in graph and f"{PACKAGE}.stats" in graph[f"{PACKAGE}.tables.grouping"]

"""Check the package's architecture rules and write their figures (bench/architecture.json).

The rules (``../shared/DESIGN.md``, "Inside MedOpenClawLib"): no import circles, function-level imports included;
each layer imports only the layers under it (``LAYERS``); function-level imports of the package's own modules at most
``MAX_LOCAL_IMPORTS``, each with a comment naming the optional heavy dependency it defers; no Python file over
``MAX_LINES`` lines; benchmark dataset names in at most ``MAX_DATASET_FILES`` files outside the module folders.

Read from the sources with :mod:`ast` (nothing is imported), so it runs in a second::

    python scripts/check_architecture.py            # prints the figures and the problems, exits 1 on any
    python scripts/check_architecture.py --write    # also writes bench/architecture.json
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"MedOpenClawLib": ROOT / "MedOpenClaw" / "MedOpenClawLib",
            "MedCopilotLib": ROOT / "MedCopilot" / "MedCopilotLib"}
MAX_LINES = 500
MAX_LOCAL_IMPORTS = 40
MAX_DATASET_FILES = 2
DATASET_NAMES = re.compile(r"ucsf|pdgm|lumiere|nsclc|bracs|camelyon", re.IGNORECASE)
MODULE_FOLDERS = "MedOpenClawLib.bench.modules."
# the nodes whose bodies hold statements: an import is found under these only (never inside an expression)
STATEMENT_NODES = (ast.stmt, ast.excepthandler, ast.match_case)

# layer -> the layers (module-name prefixes) it may import besides itself; a module's layer is the longest prefix
# of its name listed here. Layers not listed (or listed as None) may import anything (the top: cli, server, gui,
# worker, ...).
CORE = "MedOpenClawLib.core"
ENGINES = ("MedOpenClawLib.viewer", "MedOpenClawLib.evidence", "MedOpenClawLib.operators",
           "MedOpenClawLib.pathology")
LAYERS: dict[str, tuple[str, ...] | None] = {
    CORE: (),
    **{engine: (CORE,) for engine in ENGINES},
    # evidence capture and the analysis operators are radiology toolsets over the viewer's scene
    "MedOpenClawLib.evidence": (CORE, "MedOpenClawLib.viewer"),
    "MedOpenClawLib.operators": (CORE, "MedOpenClawLib.viewer", "MedOpenClawLib.evidence"),
    "MedOpenClawLib.trace_audit": (CORE,),
    "MedOpenClawLib.trace_audit.commands": None,  # its command line: a front-end, as cli and server are
    "MedOpenClawLib.providers": (CORE,),
}


@dataclass
class Import:
    source: str  # the importing module
    target: str  # the imported module of the package
    line: int
    local: bool  # inside a function (run when it is called)
    commented: bool  # a comment on the line or the one above says why


@dataclass
class Package:
    modules: dict[str, Path] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)


def module_name(package: str, root: Path, path: Path) -> str:
    parts = [package, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(current: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import ...`` written in module ``current``."""
    if level == 0:
        return name or ""
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def import_statements(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement with whether it sits inside a function body. Imports are statements, so only
    statement lists are walked (bodies, handlers, match cases), each node once: walking every expression too, and
    each function's subtree a second time, cost more than parsing the sources (2.4 -> 1.0 s for the check)."""
    pending: list[tuple[ast.AST, bool]] = [(tree, False)]
    while pending:
        node, inside = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, inside
            continue
        inside = inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                pending += [(child, inside) for child in value if isinstance(child, STATEMENT_NODES)]


def imported_modules(node: ast.AST, current: str, is_package: bool, known: dict[str, Path]) -> Iterator[str]:
    """The package modules an import statement loads (``from .x import y`` loads ``x.y`` when y is a module)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in known or alias.name.split(".")[0] in PACKAGES:
                yield alias.name
        return
    base = resolve(current, is_package, node.level, node.module)
    if base.split(".")[0] not in PACKAGES:
        return
    submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
    yield from submodules
    if len(submodules) < len(node.names):
        yield base


def scan() -> Package:
    package = Package()
    for name, root in PACKAGES.items():
        for path in sorted(root.rglob("*.py")):
            package.modules[module_name(name, root, path)] = path
    for current, path in package.modules.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        is_package = path.name == "__init__.py"
        for node, local in import_statements(ast.parse(text, str(path))):
            line = lines[node.lineno - 1]
            commented = "#" in line or (node.lineno > 1 and lines[node.lineno - 2].strip().startswith("#"))
            for target in imported_modules(node, current, is_package, package.modules):
                if target in package.modules:
                    package.imports.append(Import(current, target, node.lineno, local, commented))
    return package


def cycles(package: Package) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {name: set() for name in package.modules}
    for edge in package.imports:
        if edge.source != edge.target:
            graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def layer_of(module: str) -> str | None:
    matches = [layer for layer in LAYERS if module == layer or module.startswith(layer + ".")]
    return max(matches, key=len) if matches else None


def layer_violations(package: Package) -> list[str]:
    problems = []
    for edge in package.imports:
        layer = layer_of(edge.source)
        if layer is None or edge.target == layer or edge.target.startswith(layer + ".") or edge.target in PACKAGES:
            continue
        allowed = LAYERS[layer]
        if allowed is None:
            continue
        if not any(edge.target == ok or edge.target.startswith(ok + ".") for ok in allowed):
            problems.append(f"{edge.source}:{edge.line} imports {edge.target} ({layer} may import "
                            f"{', '.join(allowed) or 'nothing of the package'})")
    return sorted(set(problems))


def figures() -> tuple[dict, list[str]]:
    package = scan()
    circles = cycles(package)
    layers = layer_violations(package)
    local = [edge for edge in package.imports if edge.local]
    local_statements = sorted({(edge.source, edge.line, edge.commented) for edge in local})
    uncommented = [f"{source}:{line}" for source, line, commented in local_statements if not commented]
    lengths = {str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
               for path in package.modules.values()}
    long_files = sorted(name for name, count in lengths.items() if count > MAX_LINES)
    dataset_files = sorted(str(path.relative_to(ROOT)) for name, path in package.modules.items()
                           if not name.startswith(MODULE_FOLDERS) and DATASET_NAMES.search(path.read_text("utf-8")))
    result = {
        "modules": len(package.modules),
        "import_circles": circles,
        "layer_violations": layers,
        "function_level_imports_of_own_modules": len(local_statements),
        "function_level_imports_without_comment": uncommented,
        "files_over_limit": {name: lengths[name] for name in long_files},
        "files_naming_datasets_outside_module_folders": dataset_files,
        "limits": {"lines": MAX_LINES, "function_level_imports": MAX_LOCAL_IMPORTS,
                   "files_naming_datasets": MAX_DATASET_FILES},
    }
    problems = [f"import circle: {' <-> '.join(circle)}" for circle in circles]
    problems += [f"layer: {violation}" for violation in layers]
    if len(local_statements) > MAX_LOCAL_IMPORTS:
        problems.append(f"{len(local_statements)} function-level imports of the package's own modules "
                        f"(at most {MAX_LOCAL_IMPORTS})")
    problems += [f"function-level import without a comment naming its heavy dependency: {where}"
                 for where in uncommented]
    problems += [f"{name}: {lengths[name]} lines (at most {MAX_LINES})" for name in long_files]
    if len(dataset_files) > MAX_DATASET_FILES:
        problems.append(f"{len(dataset_files)} files outside bench/modules name a dataset (at most "
                        f"{MAX_DATASET_FILES}): {', '.join(dataset_files)}")
    return result, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the figures to bench/architecture.json")
    parser.add_argument("--quiet", action="store_true", help="print only the problems")
    args = parser.parse_args(argv)
    result, problems = figures()
    if args.write:
        (ROOT / "bench" / "architecture.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if not args.quiet:
        print(json.dumps({key: (len(value) if isinstance(value, (list, dict)) else value)
                          for key, value in result.items() if key != "limits"}, indent=1))
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""Static check of a Slicer scripted module, for builds without the Slicer application.

Every listed script must parse, and the main script ``<Module>.py`` must define the four classes Slicer's
module factory and ``slicer.testing.runUnitTest`` look up by name: ``<Module>`` (ScriptedLoadableModule),
``<Module>Widget``, ``<Module>Logic`` and ``<Module>Test`` with their scripted-module base classes.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

REQUIRED_BASES = {
    "": "ScriptedLoadableModule",
    "Widget": "ScriptedLoadableModuleWidget",
    "Logic": "ScriptedLoadableModuleLogic",
    "Test": "ScriptedLoadableModuleTest",
}


def base_names(node: ast.ClassDef) -> set[str]:
    names = set()
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.add(base.id)
        elif isinstance(base, ast.Attribute):
            names.add(base.attr)
    return names


def check_main_script(module: str, tree: ast.Module) -> list[str]:
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    problems = []
    for suffix, base in REQUIRED_BASES.items():
        name = module + suffix
        if name not in classes:
            problems.append(f"class {name} is missing")
        elif base not in base_names(classes[name]):
            problems.append(f"class {name} does not derive from {base}")
    test_class = classes.get(module + "Test")
    if test_class is not None:
        methods = {node.name for node in test_class.body if isinstance(node, ast.FunctionDef)}
        if not any(name.startswith("test") for name in methods):
            # ctest's slicer.testing.runUnitTest loads the test* methods (unittest's loader), never runTest
            problems.append(f"class {module}Test has no test* method")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--module", required=True)
    parser.add_argument("scripts", nargs="+", type=Path)
    args = parser.parse_args(argv)
    problems = []
    main_seen = False
    for script in args.scripts:
        try:
            tree = ast.parse(script.read_text(encoding="utf-8"), filename=str(script))
        except (OSError, SyntaxError) as error:
            problems.append(f"{script}: {error}")
            continue
        if script.name == f"{args.module}.py":
            main_seen = True
            problems.extend(f"{script}: {problem}" for problem in check_main_script(args.module, tree))
    if not main_seen:
        problems.append(f"{args.module}.py is not among the module scripts")
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{args.module}: {len(args.scripts)} scripts checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

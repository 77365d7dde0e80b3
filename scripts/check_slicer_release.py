"""The in-Slicer code under the Python and bundled packages of one 3D Slicer release (Testing/SlicerReleases/).

    .venv-slicer/slicer-5.12/bin/python scripts/check_slicer_release.py    (ctest: slicer_python_slicer-5.12)

Run with the release's venv (``scripts/setup_slicer_pythons.sh``). Two checks:

1. every module that runs inside Slicer holds none of the Python 3.10 constructs that Python 3.9 parses but
   rejects when run, and imports: MedOpenClawLib (not the benchmark runner, the command line or the MCP
   front-end, which run in a Python of their own) and MedCopilotLib, the module and batch scripts, and every
   package module those reach by an import anywhere in their bodies (the trace audit imports
   ``bench.parsers``, so it and what it imports run inside Slicer too). A module that needs the application
   itself (``slicer`` where no slicer-core wheel exists for the release's Python, PythonQt's ``qt``) or an
   optional feature's package is listed as such; any other failure fails;
2. the tests of the in-Slicer paths with this Python (in this process, after check 1): against the Slicer
   application double (module binding, the module tests ``MedOpenClawTest``/``MedCopilotTest``, ``run_bench.py``
   under a launcher that forks the application, ``verify_in_slicer.py``) where slicer-core exists (Python 3.10
   and later: the supported releases), and everywhere the copilot-logic and packaging tests and the refusal of
   releases older than ``dependencies.MIN_SLICER``. On a release the module refuses at load (the venv's name says
   which) its code runs only as far as the refusal, and the ``core`` feature is never installed (its packages may
   need a newer Python): there only the refusal test runs.

Exit status: 0 when everything passed, 1 otherwise.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"MedOpenClawLib": ROOT / "MedOpenClaw" / "MedOpenClawLib",
            "MedCopilotLib": ROOT / "MedCopilot" / "MedCopilotLib"}
# run outside Slicer, in the runner's or front-end's own Python
NOT_IN_SLICER = ("MedOpenClawLib.bench", "MedOpenClawLib.cli", "MedOpenClawLib.server.mcp",
                 "MedOpenClawLib.server.commands", "MedOpenClawLib.server.http_guard", "MedOpenClawLib.server.rest_app",
                 "MedOpenClawLib.worker.__main__", "MedOpenClawLib.worker.scripts")
# what only the running application provides (PySide6 stands in for PythonQt's qt in the tests)
APPLICATION_MODULES = ("slicer", "qt", "PySide6")
BUILTIN_TYPES = {"str", "int", "float", "bool", "bytes", "dict", "list", "tuple", "set", "frozenset", "type", "object"}
TESTS = "Testing/Python/"
REFUSAL = TESTS + "gui/test_slicer_release_refusal.py"
EVERYWHERE = [TESTS + "copilot/test_copilot_logic.py", TESTS + "gui/test_gui_packaging.py", REFUSAL]
WITH_SLICER_CORE = [TESTS + "viewer/test_slicer_app_double.py", TESTS + "gui/test_slicer_module_tests.py",
                    TESTS + "viewer/test_verify_in_slicer.py",
                    TESTS + "worker/test_worker_process_tree.py", TESTS + "gui/test_runtime_trace_kept.py"]
# needs the benchmark runner (its own Python) or, without slicer-core, a registry over the scene
NOT_HERE = "not ctrl_c and not pathology"
NOT_HERE_WITHOUT_SLICER = NOT_HERE + " and not track_b_loads_without"


def in_slicer_files() -> dict[str, Path]:
    """Module name -> file of every module that runs inside Slicer."""
    files = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            if not name.startswith(NOT_IN_SLICER):
                files[name] = path
    return files


def all_files() -> dict[str, Path]:
    """Module name -> file of every module of the two packages."""
    files = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            files[".".join((package, *parts)).removesuffix(".__init__")] = path
    return files


@functools.cache
def syntax_nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of ``path``'s syntax tree (``ast.walk`` order), parsed and walked once: the import walk and the
    Python 3.10 scan read the same files."""
    return tuple(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def imported_names(name: str, path: Path) -> set[str]:
    """The package modules ``path`` imports anywhere in its body (function-level imports too: they run inside
    Slicer the first time the function does), relative imports resolved against ``name``."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in syntax_nodes(path):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif (is_package and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module"):
            found.add(f"{name}.*")  # a package that imports its modules by name (bench.modules' spec files)
    return found


def in_slicer_modules() -> list[str]:
    """The in-Slicer modules and every package module they reach by an import (a runner module such as
    ``bench.parsers`` that the trace audit imports runs inside Slicer too), in name order."""
    files, roots = all_files(), list(in_slicer_files())
    reached, pending = set(roots), [*roots, *(f"<script>{path}" for path in in_slicer_scripts())]
    while pending:
        name = pending.pop()
        path = Path(name.removeprefix("<script>")) if name.startswith("<script>") else files[name]
        for imported in imported_names(name, path):
            if imported.endswith(".*"):
                package = imported[:-1]
                pending.extend(module for module in files if module.startswith(package) and module not in reached)
                reached.update(module for module in files if module.startswith(package))
                continue
            parts = imported.split(".")
            for length in range(1, len(parts) + 1):  # importing a.b.c imports a and a.b first
                module = ".".join(parts[:length])
                if module in files and module not in reached:
                    reached.add(module)
                    pending.append(module)
    return sorted(reached)


def in_slicer_scripts() -> list[Path]:
    """The module files and the scripts Slicer runs (``--python-script``)."""
    return [ROOT / "MedOpenClaw" / "MedOpenClaw.py", ROOT / "MedCopilot" / "MedCopilot.py",
            PACKAGES["MedOpenClawLib"] / "worker" / "scripts" / "run_bench.py",
            ROOT / "scripts" / "verify_in_slicer.py"]


def refused_release() -> bool:
    """Whether this venv is that of a 3D Slicer release the module refuses at load (``.venv-slicer/slicer-5.8``)."""
    from MedOpenClawLib.core.dependencies import slicer_release_problem

    numbered = re.fullmatch(r"slicer-(\d+)\.(\d+)", Path(sys.prefix).name)  # not "slicer-preview"
    return bool(numbered) and slicer_release_problem(int(numbered[1]), int(numbered[2])) is not None


def optional_packages() -> set[str]:
    """The top-level import names of the optional features' packages (highdicom, torch, ...): imported only where
    used, after ``dependencies.require`` answered ``missing_dependency`` without them."""
    from MedOpenClawLib.core.dependencies import FEATURES, import_name

    return {import_name(requirement).split(".")[0] for feature, requirements in FEATURES.items() if feature != "core"
            for requirement in requirements}


def check_imports(modules: list[str]) -> tuple[list[str], list[str]]:
    """(failures, modules that need the application or an optional feature's package), one line each."""
    failures, needs_application = [], []
    optional = optional_packages()
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as missing:
            if (missing.name or "").split(".")[0] in (*APPLICATION_MODULES, *optional):
                needs_application.append(f"{name} (needs {missing.name})")
            else:
                failures.append(f"{name}: {missing!r}")
        except Exception as error:
            failures.append(f"{name}: {type(error).__name__}: {error}")
    return failures, needs_application


def is_type(node: ast.AST) -> bool:
    """``None``, a capitalised or builtin type name, ``X[...]``, or ``X | Y`` of those."""
    if isinstance(node, ast.Constant):
        return node.value is None
    if isinstance(node, ast.Name):  # CONSTANTS (re.IGNORECASE | re.MULTILINE) are flags, not types
        return node.id in BUILTIN_TYPES or (node.id[:1].isupper() and not node.id.isupper())
    if isinstance(node, ast.Attribute):
        return node.attr[:1].isupper() and not node.attr.isupper()
    if isinstance(node, ast.Subscript):
        return is_type(node.value)
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and is_type(node.left) and is_type(
        node.right)


def python_310_constructs(path: Path) -> list[str]:
    """What Python 3.9 (Slicer 5.6/5.8) rejects at run time but parses, in code that it cannot import here for
    want of ``slicer``: ``X | Y`` of types outside annotations, ``zip(strict=)``, ``field(kw_only=)``."""
    annotations = set()
    for node in syntax_nodes(path):
        for annotation in (getattr(node, "annotation", None), getattr(node, "returns", None)):
            if annotation is not None:
                annotations.update(id(part) for part in ast.walk(annotation))
    found = []
    for node in syntax_nodes(path):
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and id(node) not in annotations
                and is_type(node)):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)} at run time")
        if isinstance(node, ast.Call) and any(keyword.arg in ("strict", "kw_only") for keyword in node.keywords) \
                and isinstance(node.func, ast.Name) and node.func.id in ("zip", "field"):
            found.append(f"{path.name}:{node.lineno}: {node.func.id}() keyword of Python 3.10")
    return found


def has_slicer_core() -> bool:
    return importlib.util.find_spec("slicer") is not None


def main() -> int:
    sys.path[:0] = [str(ROOT / "MedOpenClaw"), str(ROOT / "MedCopilot")]
    print(f"Python {sys.version.split()[0]}, slicer-core: {'yes' if has_slicer_core() else 'no'}")
    if refused_release():  # the module's code runs there only as far as the refusal
        print("a release the module refuses at load: the refusal is checked")
        failures, tests = [], [REFUSAL]
    else:
        failures, tests = in_slicer_failures(), EVERYWHERE + (WITH_SLICER_CORE if has_slicer_core() else [])
    selection = NOT_HERE if has_slicer_core() else NOT_HERE_WITHOUT_SLICER
    # the processes the tests start find the packages as this one does
    os.environ.update(PYTHONPATH=f"{ROOT / 'MedOpenClaw'}:{ROOT / 'MedCopilot'}", QT_QPA_PLATFORM="offscreen")
    os.chdir(ROOT)
    import pytest

    # the tests run in this process, where check 1 has already imported the in-Slicer modules and what they import
    # (slicer-core, PySide6, the model SDKs): a pytest process of its own imported them all again (~4 s of CPU).
    # pytest's note that a plugin's package was imported before it could rewrite the plugin's asserts (anyio's, which
    # the SDKs import; pyproject.toml turns that plugin off) is left out: no test here asserts in a plugin
    imported = "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning"
    code = pytest.main(["-q", "-p", "no:cacheprovider", "-W", imported, "-k", selection, *tests])
    return 1 if failures or code else 0


def in_slicer_failures() -> list[str]:
    """Check 1 (imports and Python 3.10 constructs), printed; the failures."""
    modules = in_slicer_modules()
    failures, needs_application = check_imports(modules)
    print(f"imports: {len(modules) - len(failures) - len(needs_application)} modules imported, "
          f"{len(needs_application)} need the application or an optional package: "
          f"{', '.join(needs_application) or 'none'}")
    for failure in failures:
        print(f"FAIL import {failure}")
    files = all_files()
    constructs = [found for path in [*(files[name] for name in modules), *in_slicer_scripts()]
                  for found in python_310_constructs(path)]
    for construct in constructs:
        print(f"FAIL {construct}")
    return failures + constructs


if __name__ == "__main__":
    sys.exit(main())

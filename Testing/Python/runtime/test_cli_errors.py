"""The ``medopenclaw`` command line: a user's mistake is one line and exit status 2 for every sub-command, never a
traceback; every ``--help`` and ``bench parse/score/report`` work where slicer, vtk and torch cannot be imported, and
``--help`` imports none of the numeric stack either (a fast start for every command)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from MedOpenClawLib.cli import main

REPO = Path(__file__).resolve().parents[3]
HEAVY = ("slicer", "slicer_core", "vtk", "vtkmodules", "torch", "monai")


@pytest.mark.parametrize("argv", [
    ["replay", "/nonexistent/trace.jsonl", "--data-root", "{tmp}"],
    ["bench", "score", "--module", "lumiere", "--cases", "/nonexistent", "--responses", "/nonexistent.jsonl"],
    ["bench", "report", "/nonexistent"],
    ["bench", "prepare", "--module", "lumiere", "--source", "/nonexistent", "--out", "{tmp}/prepared"],
    ["bench", "run", "--module", "lumiere", "--agent", "oracle", "--cases", "/nonexistent", "--out", "{tmp}/run"],
    ["bench", "run", "--module", "lumiere", "--agent", "montage", "--out", "{tmp}/run"],
    ["bench", "cohort", "--out", "/proc/not-writable", "--modules", "lumiere", "--cases", "1"],
    ["mcp", "--data-root", "{tmp}", "--max-sessions", "2"],  # stdio: one client, one scene
    ["serve", "--data-root", "{tmp}", "--in-process", "--session-idle", "60"],
])
def test_a_mistake_is_one_error_line(argv, tmp_path, capsys):
    assert main([part.format(tmp=tmp_path) for part in argv]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: ") and "Traceback" not in captured.err


@pytest.mark.parametrize("argv", [
    ["serve", "--data-root", "/nonexistent"],
    ["replay", "/nonexistent/trace.jsonl", "--data-root", "/nonexistent"],
    ["mcp", "--data-root", "/etc/hostname"],
    ["bench", "run", "--module", "nope", "--agent", "oracle", "--out", "x"],
    ["bench", "run", "--module", "lumiere", "--agent", "model", "--extra-body", "[1]", "--out", "x"],
    ["bench", "run", "--module", "lumiere", "--agent", "model", "--fail-on-error", "1.5", "--out", "x"],
    [],
])
def test_a_usage_mistake_is_one_line_naming_the_command(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and err.startswith("medopenclaw") and "--help)" in err


BLOCKED_CLI = """
import argparse, contextlib, importlib.abc, io, json, sys

# importing a heavy package raises ImportError, as where it is not installed (a None in sys.modules would also
# break libraries that only look for it there, e.g. scipy's array-API checks)
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {heavy!r}:
            raise ImportError(f"{{name}} is not installed here")
        return None

sys.meta_path.insert(0, NotInstalled())
from MedOpenClawLib.cli import build_parser, main

def commands(parser, prefix):
    yield prefix
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, prefix + [name])

helps = 0
for argv in commands(build_parser(), []):
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv + ["--help"])
        except SystemExit as exited:
            assert exited.code == 0, argv
    helps += 1
# what the parsers alone loaded: the commands' work imports these, never their flags
loaded = sorted(name for name in ("numpy", "scipy", "matplotlib", "mcp") if name in sys.modules)
codes = [main(argv) for argv in {runs!r}]
print(json.dumps({{"helps": helps, "loaded": loaded, "codes": codes}}))
"""


def test_help_and_offline_bench_commands_need_no_viewer(typed_run, tmp_path):
    """The run and cases read here are conftest's ``typed_run`` (one UCSF-PDGM oracle episode), made once."""
    cases, run = typed_run[0] / "cases", typed_run[0] / "runs" / "x"
    responses = tmp_path / "answers.jsonl"
    responses.write_text(json.dumps({"case_id": "UCSF-PDGM-0001", "response": "ANSWER: glioblastoma"}) + "\n")
    runs = [["bench", "parse", "--module", "ucsf-pdgm"],
            ["bench", "score", "--module", "ucsf-pdgm", "--cases", str(cases), "--responses", str(responses)],
            ["bench", "report", str(run), "--out", str(tmp_path / "report")]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "MedOpenClaw"), str(REPO / "MedCopilot")])}
    completed = subprocess.run([sys.executable, "-c", BLOCKED_CLI.format(heavy=HEAVY, runs=runs)], env=env,
                               input="ANSWER: glioblastoma", capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    outcome = json.loads(completed.stdout.strip().splitlines()[-1])
    assert outcome["helps"] >= 14 and outcome["loaded"] == [] and outcome["codes"] == [0, 0, 0]
    assert (tmp_path / "report" / "index.html").exists()


def test_each_command_module_registers_the_commands_the_table_names():
    """`medopenclaw mcp` builds only server.mcp_commands's parsers (a fast MCP start): the table must name every
    sub-command each module registers, or a command line would miss its own parser."""
    import argparse
    import importlib

    from MedOpenClawLib.cli import COMMAND_MODULES, build_parser

    for module, names in COMMAND_MODULES.items():
        subparsers = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).add_commands(subparsers)
        assert tuple(subparsers.choices) == names, module
        assert set(build_parser([names[0]])._subparsers._group_actions[0].choices) == set(names)
    assert len(build_parser([])._subparsers._group_actions[0].choices) == sum(map(len, COMMAND_MODULES.values()))


def numeric_options():
    """(command words, option string, nargs, type) of every option in the command tree that takes numbers."""
    import argparse

    from MedOpenClawLib.cli import build_parser

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, [*prefix, name])
            elif action.type in (int, float) or hasattr(action.type, "within"):
                yield prefix, action.option_strings[0], action.nargs, action.type

    return list(walk(build_parser(), []))


def test_every_numeric_option_is_checked_at_parse_time():
    """A plain int/float option takes NaN, inf or a negative timeout and fails later, far from the mistake."""
    from MedOpenClawLib.cli import Number

    options = numeric_options()
    assert len(options) >= 25
    assert [(words, option) for words, option, _, kind in options if not isinstance(kind, Number)] == []


@pytest.mark.parametrize("words,option,nargs,kind", [
    pytest.param(words, option, nargs, kind, id=" ".join([*words, option])) for words, option, nargs, kind in
    numeric_options()])
def test_a_bad_number_is_a_usage_error_naming_its_option(words, option, nargs, kind, capsys):
    below = [str(kind.minimum - 1)] if kind.minimum is not None else [str(kind.above)] if kind.above is not None else []
    above = [str(kind.maximum + 1)] if kind.maximum is not None else []
    for bad in ["nan", "inf", "-inf", "1e999", "x", *below, *above]:
        if nargs and bad == "-inf":
            continue  # argparse reads "-inf" among several values as an option, not as a value
        with pytest.raises(SystemExit) as exited:  # --option=-1: a lone negative value must not read as an option
            main([*words, *([f"{option}={bad}"] if nargs is None else [option, *[bad] * nargs])])
        err = capsys.readouterr().err
        assert exited.value.code == 2 and f"argument {option}" in err and "not " in err, (bad, err)
        assert err.count("\n") == 1

"""Paths as a user types them: every sub-command run through the installed ``medopenclaw`` console script from a
working directory of its own, with relative paths only (a relative ``bench run --out`` once failed with 'is not in
the subpath'), and every path option of the command tree resolved once, where the CLI parses it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from console_script import medopenclaw

from MedOpenClawLib.cli import build_parser, executable, existing_directory, user_path

PATH_TYPES = (user_path, existing_directory, executable)
# the options that take text which is not a path; any other text option must have one of PATH_TYPES
NOT_PATHS = {("bench", "score", "--name"), ("bench", "run", "--model"), ("bench", "run", "--base-url"),
             ("bench", "run", "--ray-address"), ("trace", "verify", "--expect-head"), ("trace", "audit", "--module"),
             ("bench", "run", "--api-version"), ("bench", "run", "--project"), ("bench", "run", "--region")}


def text_options(parser: argparse.ArgumentParser, words: tuple = ()):
    """(command words + option, type) of every option or positional taking free text (no choices)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from text_options(sub, (*words, name))
        elif action.nargs != 0 and action.choices is None and (action.type is None or action.type in PATH_TYPES):
            yield (*words, (action.option_strings or [action.dest])[0]), action.type


def test_every_path_option_is_resolved_where_the_cli_parses_it():
    options = dict(text_options(build_parser()))
    untyped = sorted(words for words, kind in options.items() if kind is None and words not in NOT_PATHS)
    assert untyped == []
    assert sum(kind is not None for kind in options.values()) >= 20


def test_relative_paths_are_absolute_after_parsing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cases" / "data").mkdir(parents=True)
    for argv, names in [
        (["serve", "--data-root", "cases/data", "--trace", "t/trace.jsonl"], ("data_root", "trace")),
        (["mcp", "--data-root", "cases/data", "--trace", "t/trace.jsonl"], ("data_root", "trace")),
        (["bench", "report", "runs/a", "runs/b", "--out", "rep"], ("runs", "out")),
        (["bench", "run", "--module", "lumiere", "--agent", "oracle", "--cases", "cases", "--cache-dir", "c",
          "--out", "runs/x"], ("cases", "cache_dir", "out")),
    ]:
        args = build_parser(argv).parse_args(argv)
        for name in names:
            values = getattr(args, name)
            for value in values if isinstance(values, list) else [values]:
                assert Path(value).is_absolute() and Path(value).is_relative_to(tmp_path), (argv, name, value)


def test_every_sub_command_takes_relative_paths_from_its_own_working_directory(typed_run):
    """Every other sub-command, from the directory where ``typed_run`` typed ``bench cohort``, ``bench prepare``
    and ``bench run`` (their outputs, ``cases`` and ``runs/x``, are only read here)."""
    cwd, summary = typed_run
    assert summary["n"] == 1 and summary["errors"] == 0
    trace = next((cwd / "runs" / "x" / "episodes").glob("*/trace-1.jsonl")).relative_to(cwd).as_posix()
    medopenclaw(cwd, "trace", "verify", trace)
    medopenclaw(cwd, "trace", "audit", "runs/x", "--json")
    medopenclaw(cwd, "replay", trace, "--data-root", "cases/data")
    (cwd / "answers.jsonl").write_text(json.dumps({"case_id": "UCSF-PDGM-0001", "response": "ANSWER: A"}) + "\n")
    medopenclaw(cwd, "bench", "score", "--module", "ucsf-pdgm", "--cases", "cases", "--responses", "answers.jsonl",
                "--out", "scores")
    medopenclaw(cwd, "bench", "report", "runs/x", "scores", "--out", "report")
    medopenclaw(cwd, "bench", "cohort", "--where", "--cache-dir", "cache")
    assert (cwd / "report" / "index.html").is_file() and (cwd / "scores").is_dir()
    assert json.loads(medopenclaw(cwd, "tools", "--format", "mcp"))


@pytest.mark.parametrize("text", ["", " "])
def test_an_empty_path_is_a_usage_error(text, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser(["bench"]).parse_args(["bench", "report", text])
    assert exited.value.code == 2 and "empty path" in capsys.readouterr().err

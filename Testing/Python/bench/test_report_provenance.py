"""Provenance (run.json, `--version`, the command line without secrets) and the `bench run` conveniences:
--limit ranges, --case-ids, several modules in one run, vendor key variables, and the refusals that
leave nothing behind (a bad --cases, a package of another module)."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest
from agents_cases import write_ucsf_package

from MedOpenClawLib.bench.cases import load_cases
from MedOpenClawLib.bench.cohort_cache import synthetic_cases
from MedOpenClawLib.bench.progress import Activity
from MedOpenClawLib.bench.report import write_report
from MedOpenClawLib.bench.report.formats import results_schema
from MedOpenClawLib.bench.report.plots import mark_zero_and_undefined
from MedOpenClawLib.bench.run_command import _modules, module_list
from MedOpenClawLib.bench.run_launch import combined_summary
from MedOpenClawLib.bench.tasks import parse_limit, select_cases
from MedOpenClawLib.cli import build_parser, main
from MedOpenClawLib.core.provenance import finish, provenance, redact_argv, source_revision, summary
from MedOpenClawLib.providers.config import ProviderConfig


def test_the_command_line_is_kept_without_its_secrets():
    argv = ["bench", "run", "--api-key", "sk-visible-1", "--token=abc", "--base-url",
            "https://user:pw@example.org/v1", "--extra-body", '{"api_key": "k1", "top_k": 20}', "--model", "m",
            "--note", "uses sk-from-the-env-123"]
    cleaned = redact_argv(argv, secrets=("sk-from-the-env-123",))
    assert cleaned == ["bench", "run", "--api-key", "***", "--token=***", "--base-url",
                       "https://***@example.org/v1", "--extra-body", '{"api_key": "***", "top_k": 20}',
                       "--model", "m", "--note", "uses ***"]


def test_provenance_names_version_commit_platform_and_duration(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-in-env-0042")
    record = provenance(["bench", "run", "--note", "sk-secret-in-env-0042"])
    assert record["version"] and record["python"] and record["platform"]
    assert set(record["versions"]) == {"slicer-core", "vtk"}
    assert record["command"] == ["medopenclaw", "bench", "run", "--note", "***"]
    done = finish(record)
    assert done["duration_s"] >= 0 and done["finished"] >= record["started"]
    assert "medopenclaw" in summary(done) and "UTC" in summary(done) and summary(None) == "not recorded"

    assert source_revision(tmp_path) is None  # not a checkout (a wheel)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "__init__.py").write_text("one")
    subprocess.run([*git, "add", "__init__.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    clean = source_revision(tmp_path)
    assert len(clean["commit"]) == 40 and clean["dirty"] is False
    os.utime(tmp_path / "__init__.py", (1, 1))  # stat data changed, content not: the index is never refreshed
    assert source_revision(tmp_path) == clean
    (tmp_path / "__init__.py").write_text("two")
    assert source_revision(tmp_path) == {**clean, "dirty": True}


def test_provenance_runs_nothing_a_repository_configures_and_records_only_a_repository_tracking_it(tmp_path):
    """A package inside someone else's working tree whose configuration names an fsmonitor and whose hooks
    include post-index-change: neither runs (git status used to run both), and no commit is recorded, since that
    repository does not track the package. A tracked package's commit is recorded, still running neither."""
    ran = tmp_path / "ran"
    repository = tmp_path / "theirs"
    repository.mkdir()
    git = ["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repository / "theirs.txt").write_text("theirs")
    subprocess.run([*git, "add", "theirs.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    for name in ("fsmonitor", "post-index-change"):
        script = repository / ".git" / "hooks" / name
        script.write_text(f"#!/bin/sh\necho {name} >> {ran}\n")
        script.chmod(0o755)
    subprocess.run([*git, "config", "core.fsmonitor", str(repository / ".git" / "hooks" / "fsmonitor")], check=True)
    package = repository / "vendored" / "MedOpenClawLib"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (repository / "theirs.txt").write_text("changed")
    assert source_revision(package) is None
    subprocess.run([*git, "add", "vendored"], check=True)
    subprocess.run([*git, "commit", "-qm", "vendored"], check=True, env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"})
    if ran.exists():
        ran.unlink()  # the test's own git commands ran them
    tracked = source_revision(package)
    assert len(tracked["commit"]) == 40 and tracked["dirty"] is True
    assert not ran.exists()


def test_version_answers(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    out = capsys.readouterr().out
    assert exited.value.code == 0 and out.startswith("medopenclaw ") and "Python" in out and "vtk" in out


def test_vendor_key_variables_go_only_to_their_vendor():
    env = {"OPENAI_API_KEY": "sk-openai", "ANTHROPIC_API_KEY": "sk-ant"}
    assert ProviderConfig.resolve(model="gpt-x", environ=env).api_key == "sk-openai"
    assert ProviderConfig.resolve(model="claude-x", environ=env).api_key == "sk-ant"
    assert ProviderConfig.resolve(model="gpt-x", base_url="http://127.0.0.1:8000/v1", environ=env).api_key == ""
    assert ProviderConfig.resolve(model="gpt-x", environ={**env, "MEDOPENCLAW_API_KEY": "mine"}).api_key == "mine"


class _Case:
    def __init__(self, case_id):
        self.case_id = case_id


def test_limit_ranges_and_case_ids():
    cases = [_Case(f"C{index}") for index in range(1, 7)]
    assert parse_limit("3") == 3 and parse_limit("2-4") == (2, 4)
    for bad in ("0", "4-2", "a", "1-", "-3", "0-2"):
        with pytest.raises(ValueError):
            parse_limit(bad)
    assert [case.case_id for case in select_cases(cases, 2)] == ["C1", "C2"]
    assert [case.case_id for case in select_cases(cases, (2, 4))] == ["C2", "C3", "C4"]
    assert [case.case_id for case in select_cases(cases, None, ("C5", "C1"))] == ["C1", "C5"]
    assert [case.case_id for case in select_cases(cases, 1, ("C5", "C3"))] == ["C3"]
    with pytest.raises(ValueError, match="only 6 cases"):
        select_cases(cases, (7, 9))
    with pytest.raises(ValueError, match="no case 'C9'"):
        select_cases(cases, None, ("C1", "C9"))


def test_several_modules_and_their_combined_summary():
    assert module_list([_modules("nsclc,ucsf-pdgm"), _modules("nsclc")]) == ["ucsf-pdgm", "nsclc"]
    assert len(module_list([_modules("all")])) == 5
    combined = combined_summary({"a": {"episodes": 2, "scored": 2, "task": 1.0, "strict": 0.5, "loc": None,
                                       "errors": 0, "missing": 0, "invalid": 0},
                                 "b": {"episodes": 3, "scored": 2, "task": 0.0, "strict": 0.0, "loc": None,
                                       "errors": 1, "missing": 0, "invalid": 0, "interrupted": True}})
    assert (combined["episodes"], combined["errors"], combined["task_macro"], combined["strict_macro"]) == \
        (5, 1, 0.5, 0.25)
    assert combined["loc_macro"] is None and combined["interrupted"] and set(combined["modules"]) == {"a", "b"}


def test_refused_runs_leave_no_run_json(tmp_path, capsys):
    """A bad --cases or a package of another module is refused before the run directory is written, so the
    corrected command is not then refused as 'a different run'."""
    cases = write_ucsf_package(tmp_path / "cases", cases=1)
    out = tmp_path / "run"
    assert main(["bench", "run", "--module", "nsclc", "--agent", "oracle", "--cases", str(cases),
                 "--out", str(out)]) == 2
    assert "is a ucsf-pdgm case package" in capsys.readouterr().err and not out.exists()
    assert main(["bench", "run", "--module", "ucsf-pdgm", "--agent", "oracle", "--cases", str(tmp_path),
                 "--out", str(out)]) == 2
    assert "manifest.json" in capsys.readouterr().err and not out.exists()
    assert main(["bench", "run", "--module", "ucsf-pdgm", "--agent", "oracle", "--cases", str(cases),
                 "--case-ids", "NOPE", "--out", str(out)]) == 2
    assert "no case 'NOPE'" in capsys.readouterr().err and not out.exists()
    assert main(["bench", "run", "--module", "ucsf-pdgm", "nsclc", "--agent", "oracle", "--cases", str(cases),
                 "--out", str(out)]) == 2
    assert "one package per module" in capsys.readouterr().err and not out.exists()


@pytest.mark.usefixtures("warm_workers")  # both invocations' episodes on one warm worker
def test_run_json_records_every_invocation(tmp_path, capsys):
    cases = write_ucsf_package(tmp_path / "cases", cases=2)
    out = tmp_path / "run"
    argv = ["bench", "run", "--module", "ucsf-pdgm", "--agent", "oracle", "--cases", str(cases),
            "--case-ids", "UCSF-PDGM-0002", "--out", str(out)]
    assert main(argv) == 0 and main([*argv[:-4], "--limit", "1-2", "--out", str(out)]) == 0
    summary_line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary_line["n"] == 2 and summary_line["executed_now"] == 1  # the second invocation ran case 1 only
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["module"] == "ucsf-pdgm" and len(manifest["invocations"]) == 2
    first = manifest["invocations"][0]
    assert first["command"] == ["medopenclaw", *argv] and first["duration_s"] >= 0 and first["version"]
    assert first["source"] is None or len(first["source"]["commit"]) == 40
    report = write_report([out], tmp_path / "report", evidence=False, command=["bench", "report", str(out)])
    body = json.loads((tmp_path / "report" / "results.json").read_text())
    jsonschema.validate(body, results_schema())
    assert body["provenance"]["command"] == ["medopenclaw", "bench", "report", str(out)]
    assert [len(run["invocations"]) for run in body["runs"]] == [2]
    page = (tmp_path / "report" / body["runs"][0]["page"]).read_text()
    assert page.count("<td><code>medopenclaw bench run --module ucsf-pdgm") == 2 and report["episodes"] == 2
    assert "Report written by medopenclaw" in (tmp_path / "report" / "index.html").read_text()


def _actions(parser, prefix=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, (*prefix, name))
        else:
            yield prefix, action


def test_every_option_has_help_and_errors_name_no_internal_dest(capsys):
    missing = [(" ".join(prefix), action.option_strings or action.dest) for prefix, action in _actions(build_parser())
               if not action.help and not isinstance(action, argparse._HelpAction)]
    assert missing == []
    for argv in (["bench"], ["trace"]):
        with pytest.raises(SystemExit):
            main(argv)
        err = capsys.readouterr().err
        assert "_command" not in err and "{" in err  # the choices, not 'bench_command'
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "MedFlow-Bench: run, report" in capsys.readouterr().out


def test_cohort_where_names_the_cache(tmp_path, capsys):
    (tmp_path / "synthetic-abc-demo-seed0-n6" / "cases" / "nsclc").mkdir(parents=True)
    (tmp_path / "synthetic-abc-demo-seed0-n6" / "cases" / "nsclc" / "manifest.json").write_text("{}")
    assert main(["bench", "cohort", "--where", "--cache-dir", str(tmp_path)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["cache"] == str(tmp_path.resolve()) and shown["current_fingerprint"]
    assert shown["cohorts"]["synthetic-abc-demo-seed0-n6"]["modules"] == ["nsclc"]
    assert main(["bench", "cohort"]) == 2 and "--out" in capsys.readouterr().err


def test_cohort_cache_prepares_the_package_bench_run_reads_once(tmp_path, capsys):
    """What ctest's demo_cohort does before the groups that run the cohort (here one small module, one case)."""
    argv = ["bench", "cohort", "--cache", "--cache-dir", str(tmp_path), "--modules", "ucsf-pdgm", "--cases", "1"]
    assert main(argv) == 0
    package = Path(json.loads(capsys.readouterr().out)["packages"]["ucsf-pdgm"])
    assert package == synthetic_cases("ucsf-pdgm", cases=1, cache_dir=tmp_path)
    assert [case.case_id for case in load_cases(package)] == ["UCSF-PDGM-0001"]
    manifest = (package / "manifest.json").stat().st_mtime_ns
    assert main(argv) == 0 and (package / "manifest.json").stat().st_mtime_ns == manifest  # kept, not redone


def test_activity_counts_on_a_terminal_and_leaves_one_line_in_logs(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setenv("COLUMNS", "120")
    terminal = Terminal()
    with Activity("writing episode pages", total=3, stream=terminal, tick_s=0.01) as activity:
        for _ in range(3):
            activity.advance()
            time.sleep(0.03)
    assert "writing episode pages 2/3" in terminal.getvalue()
    assert terminal.getvalue().endswith("writing episode pages 3/3 (0 s): done\n")
    log = io.StringIO()
    with pytest.raises(RuntimeError), Activity("generating nsclc", stream=log):
        raise RuntimeError("disk full")
    assert log.getvalue() == ""  # a failed step leaves no line: its error is the one that matters
    with Activity("generating nsclc", stream=log):
        pass
    assert log.getvalue() == "generating nsclc (0 s): done\n"


def test_the_score_chart_tells_zero_from_not_defined():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    figure, axis = pyplot.subplots()
    mark_zero_and_undefined(axis, [0.0, 1.0, 2.0], [float("nan"), 0.0, 0.5], 0.3, "C0")
    assert [text.get_text() for text in axis.texts] == ["n/a", "0"] and len(axis.lines) == 1
    pyplot.close(figure)

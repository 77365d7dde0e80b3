"""The trace audit in `bench report`: the finding-rate table per model and module, the stability table and the
milestone figure per case across repeats, from runs whose results carry an audit block or predate it."""

from __future__ import annotations

import json

from trace_builder import TraceBuilder, audit_trace

from MedOpenClawLib.bench.report import write_report
from MedOpenClawLib.bench.report.milestones import milestone_plots
from MedOpenClawLib.bench.report.runs import load_run
from MedOpenClawLib.bench.report.tables.findings import build as findings_table
from MedOpenClawLib.cli import main

LUMIERE = ("OLD_CT1", "OLD_FLAIR", "CURRENT_CT1", "CURRENT_FLAIR")
TOOLS = ("register_volumes", "apply_transform", "resample_volume", "fusion")
ANSWER = "NON_MEASURABLE_LESION: NO\nANSWER: B"


def repeat_trace(repeat: int) -> list[dict]:
    """Run 1 completes BF -> BR -> fusion; run 2 stops after BR; run 3 fuses the unregistered follow-up."""
    trace = TraceBuilder("lumiere", tools=TOOLS, volumes=LUMIERE).prompt()
    if repeat < 3:
        transform = trace.register("OLD_CT1", "CURRENT_CT1")
        output = trace.resample("CURRENT_CT1", transform, "OLD_CT1")
        if repeat == 1:
            trace.fusion("OLD_CT1", output)
    else:
        trace.fusion("OLD_CT1", "CURRENT_CT1")
    return trace.answer(("Target lesion 24 x 19 mm.\n" if repeat == 2 else "") + ANSWER).records


def write_run(root, with_audit: bool) -> None:
    (root / "episodes").mkdir(parents=True)
    (root / "run.json").write_text(json.dumps({"module": "lumiere", "agent": "heuristic", "track": "B",
                                               "max_rounds": 20}))
    for repeat in (1, 2, 3):
        folder = root / "episodes" / f"P1__r{repeat}"
        folder.mkdir()
        records = repeat_trace(repeat)
        (folder / "trace-1.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
        result = {"case_id": "P1", "episode_id": f"P1__r{repeat}", "repeat": repeat, "response": ANSWER,
                  "trace": f"episodes/P1__r{repeat}/trace-1.jsonl", "outcome": {"status": "completed"},
                  "score": {"task": 1.0, "strict": 1.0, "loc": None, "details": {"parsed": {}}}}
        if with_audit:
            result["audit"] = audit_trace(records, "lumiere").to_json()
        (folder / "result.json").write_text(json.dumps(result))


def test_findings_and_stability_tables_and_the_milestone_figure(tmp_path):
    write_run(tmp_path / "runs" / "audited", with_audit=True)
    written = write_report([tmp_path / "runs" / "audited"], tmp_path / "report", evidence=False)
    assert {"findings", "stability"} <= set(written["tables"])
    figures = [name for name in written["plots"] if "milestones" in name and name.endswith(".png")]
    assert len(figures) == 1
    tables = {table["id"]: table for table in json.loads((tmp_path / "report" / "results.json").read_text())["tables"]}
    text = (tmp_path / "report" / "results.md").read_text()
    assert "Trace audit: failure modes per model and module" in text and "stability across repeats" in text
    findings = tables["findings"]
    assert json.dumps(findings).count("Longitudinal MRI") >= 1
    markdown_row = next(line for line in text.splitlines() if "Longitudinal MRI" in line and "heuristic" in line)
    assert "0.33" in markdown_row  # F3 in one run of three, G5 in one of three
    stability_row = next(line for line in text.splitlines() if "P1" in line)
    assert "0.33" in stability_row  # one of three runs completes the workflow
    pages = {path.name: path.read_text() for path in (tmp_path / "report").rglob("P1__r*.html")}
    second, third = (next(text for name, text in pages.items() if name.startswith(f"P1__r{k}")) for k in (2, 3))
    assert "F3.fusion_unregistered" in third and 'href="#seq-' in third and 'id="seq-' in third
    assert "Evidence provenance" in second and "ungrounded" in second and "24 x 19 mm" in second
    first = next(text for name, text in pages.items() if name.startswith("P1__r1"))
    assert "none: every evidence field is grounded" in first


def test_runs_written_before_the_audit_are_audited_from_their_traces(tmp_path):
    write_run(tmp_path / "old", with_audit=False)
    run = load_run(tmp_path / "old", "old")
    assert [episode.audit["milestones"]["complete"] for episode in run.episodes] == [True, False, False]
    row = findings_table([run]).sections[0].rows[0]
    assert (row.cells["finding:F3"].estimate.value, row.cells["finding:any"].estimate.value) == (1 / 3, 2 / 3)
    assert milestone_plots([run], tmp_path) == ["milestones_old_P1.png", "milestones_old_P1.svg"]


def test_trace_audit_of_a_run_directory_gives_each_episode_and_the_stability_of_repeated_cases(tmp_path, capsys):
    write_run(tmp_path / "run", with_audit=False)
    assert main(["trace", "audit", str(tmp_path / "run"), "--json", "--fail-on", "high"]) == 1  # F2, F3
    document = json.loads(capsys.readouterr().out)
    assert [episode["episode_id"] for episode in document["episodes"]] == ["P1__r1", "P1__r2", "P1__r3"]
    assert round(document["stability"]["P1"]["complete_share"], 2) == 0.33
    assert main(["trace", "audit", str(tmp_path / "run")]) == 0
    text = capsys.readouterr().out
    assert "P1__r3: F3" in text and "P1: 3 runs, workflow complete in 33%" in text
    assert main(["trace", "audit", str(tmp_path)]) == 2  # no run here
    assert "holds no episode with a trace" in capsys.readouterr().err

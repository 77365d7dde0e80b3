"""`bench report` over several runs: the paper's table layouts, confidence intervals, formats, figures and pages."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from report_runs import cohort_of_runs

from MedOpenClawLib.bench.report import write_report
from MedOpenClawLib.bench.report.formats import latex_escape
from MedOpenClawLib.bench.report.runs import find_runs, load_run, operator_names, operators_called, run_names
from MedOpenClawLib.bench.report.tables import TABLES, all_tables

AUDIT_TABLES = ("findings", "stability")  # the fixture's runs have no traces and no repeated cases


def expected_tables(root: Path) -> list[str]:
    """Every table of TABLES but the trace-audit ones, in TABLES' order."""
    paths = find_runs([root])
    runs = [load_run(path, name) for path, name in zip(paths, run_names(paths))]
    return [table.id for table in (build(runs) for build in TABLES) if table.id not in AUDIT_TABLES]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = cohort_of_runs(tmp_path_factory.mktemp("runs"))
    out = root / "report"
    written = write_report([root / "gpt", root / "offline"], out)
    return root, out, written


def _table(out: Path, table_id: str) -> dict:
    tables = json.loads((out / "results.json").read_text())["tables"]
    return next(table for table in tables if table["id"] == table_id)


def _row(table: dict, **identity) -> dict:
    rows = [row for section in table["sections"] for row in section["rows"]
            if all(row["identity"].get(key) == value for key, value in identity.items())]
    assert len(rows) == 1, rows
    return rows[0]


def test_tables_follow_the_paper_layouts(report):
    root, out, written = report
    assert written["tables"] == expected_tables(root) and len(written["tables"]) == len(TABLES) - len(AUDIT_TABLES)
    table1 = _table(out, "table1")
    assert [column["id"] for column in table1["columns"]] == [
        "lumiere:task", "lumiere:strict", "ucsf-pdgm:task", "ucsf-pdgm:strict", "ucsf-pdgm:loc", "nsclc:task",
        "nsclc:strict", "nsclc:loc", "avg:task", "avg:strict", "avg:loc"]
    model = _row(table1, model="gpt-test", provider="openai", agent="model", track="A")
    assert model["header"] == ["gpt-test", "openai", "model", "A", "20 rounds"]  # the 5-round run is the budget study's
    cells = model["cells"]
    assert cells["ucsf-pdgm:task"]["value"] == pytest.approx(0.75, abs=1e-5)
    assert cells["ucsf-pdgm:task"]["n"] == 4  # the INVALID episode is left out
    assert cells["ucsf-pdgm:loc"]["n"] == 3  # an episode outside the Loc denominator
    assert cells["ucsf-pdgm:task"]["ci_low"] <= 0.75 <= cells["ucsf-pdgm:task"]["ci_high"]
    assert cells["avg:task"]["value"] == pytest.approx((0.5 + 0.75 + 0.5) / 3, abs=1e-5)
    assert cells["avg:loc"]["value"] == pytest.approx((2 / 3 + 0.5) / 2, abs=1e-5)
    heuristic = _row(table1, agent="heuristic")
    assert heuristic["cells"]["lumiere:task"]["value"] is None and heuristic["cells"]["avg:task"]["value"] is None
    oracle = _row(table1, agent="oracle")
    assert oracle["identity"]["privileged"] is True and oracle["header"][2] == "oracle †"
    sections = [section["title"] for section in table1["sections"]]
    assert sections == ["General-purpose models", "Offline agents", "Privileged reference †"]
    assert all(row["header"][0] != "Mean over reported" for row in table1["sections"][0]["rows"])  # one row
    table2 = _table(out, "table2")
    assert [section["rows"][0]["header"][2] for section in table2["sections"]] == ["oracle †"]

    table3 = _table(out, "table3")
    strict = _row(table3, metric="strict")
    # a Track B run with every operator: its own column after MedFlow-Bench's (operation, module) columns
    assert [column["id"] for column in table3["columns"]][-1] == "all:ucsf-pdgm"
    assert strict["cells"]["all:ucsf-pdgm"]["value"] == pytest.approx(2 / 3, abs=1e-5)
    # paired against Track A over the 3 cases both scored (Track A's Strict on U0-U2 is 1, 0, 0), not 2/3 - 0.5
    assert strict["cells"]["all:ucsf-pdgm"]["delta"] == pytest.approx(1 / 3, abs=1e-5)
    assert strict["cells"]["all:ucsf-pdgm"]["delta_n"] == 3
    assert strict["cells"]["segmentation:ucsf-pdgm"]["value"] is None
    table6 = _table(out, "table6")
    montage = _row(table6, agent="montage")
    assert montage["cells"]["ucsf-pdgm:task"]["delta"] == pytest.approx(0.5 - 1.0, abs=1e-5)  # U0, U1 paired
    assert montage["cells"]["ucsf-pdgm:task"]["delta_n"] == 2
    assert montage["cells"]["lumiere:task"]["value"] is None

    table5 = _table(out, "table5")
    row = _row(table5, agent="model")
    assert row["cells"]["lumiere:non_measurable_lesion"]["value"] == pytest.approx(0.5, abs=1e-5)
    assert row["cells"]["lumiere:new_target_lesion"]["n"] == 1  # an unscorable field is skipped, not counted
    assert row["cells"]["nsclc:q1"]["value"] == pytest.approx(0.5, abs=1e-5)
    budget = _table(out, "table7")
    assert [r["header"][4] for s in budget["sections"] for r in s["rows"]] == ["5 rounds", "20 rounds"]

    runs = _table(out, "runs")
    gpt = _row(runs, runs=["gpt/ucsf-A"])
    assert (gpt["cells"]["n"]["value"], gpt["cells"]["invalid"]["value"], gpt["cells"]["errors"]["value"]) == (4, 1, 1)
    # usage is what the run paid: every episode, the INVALID and errored ones included
    assert gpt["cells"]["input_tokens"]["value"] == 7200 and isinstance(gpt["cells"]["input_tokens"]["value"], int)
    assert gpt["cells"]["cost_usd"]["value"] == pytest.approx(0.075, abs=1e-5)


def test_formats_markdown_csv_latex_and_the_versioned_schema(report):
    root, out, _ = report
    body = json.loads((out / "results.json").read_text())
    jsonschema.validate(body, json.loads((out / "results.schema.json").read_text()))
    assert body["schema"] == "medopenclaw.bench.report" and body["schema_version"].startswith("2.")
    assert {run["name"] for run in body["runs"]} >= {"gpt/ucsf-A", "offline/oracle-ucsf"}
    markdown = (out / "results.md").read_text()
    assert "| gpt-test | openai | model | A | 20 rounds | — | — | — |" not in markdown  # Table 1 has LUMIERE values
    assert re.search(r"\| gpt-test \| openai \| model \| B \| 20 rounds \| none \| Strict \| " + r"— \| " * 8
                     + r"0\.67 \[[0-9.]+, [0-9.]+\] \(↑0\.33 \[[-+0-9., ]+\], 3 paired\) \| 3 \|", markdown)
    assert "| — | — | oracle † | A | 20 rounds |" in markdown and "† privileged" in markdown
    # a cell over other episodes than its module's n column says so (an answer outside the Loc denominator)
    # and the n column says what left the denominator and why
    assert re.search(r"\| gpt-test \| openai \| model \| A \| 20 rounds \| .*\| 0\.75 \[[0-9., ]+\] "
                     r"\| 0\.50 \[[0-9., ]+\] \| 0\.67 \[[0-9., ]+\] n=3 "
                     r"\| 4 \(−1 INVALID: environment fault; −1 provider error, not re-run yet\) \|", markdown)
    rows = list(csv.DictReader(io.StringIO((out / "results.csv").read_text())))
    cell = next(row for row in rows if row["table"] == "table1" and row["model"] == "gpt-test"
                and row["column"] == "Task" and row["group"] == "Brain MRI")
    assert float(cell["value"]) == pytest.approx(0.75, abs=1e-5) and cell["n"] == "4"
    assert cell["ci_low"] and cell["provider"] == "openai"
    latex = (out / "results.tex").read_text()
    assert latex.count(r"\begin{tabular}") == len(expected_tables(root))
    assert r"\toprule" in latex and r"\bottomrule" in latex
    assert r"\cmidrule(lr)" in latex and r"\multicolumn{4}{c}{Brain MRI}" in latex
    assert r"$\uparrow$" in latex and r"oracle $^\dagger$" in latex
    assert r"gpt/ucsf-A\_5rounds" not in latex and r"gpt/ucsf-A-5rounds" in latex
    for block in latex.split(r"\begin{tabular}")[1:]:  # every row spans exactly the declared columns
        columns = len(re.match(r"\{([lc]+)\}", block).group(1))
        for line in block.split(r"\end{tabular}")[0].splitlines():
            if line.endswith("\\\\"):
                cells = re.split(r"(?<!\\)&", line[:-2])
                spans = [int(m.group(1)) if (m := re.search(r"\\multicolumn\{(\d+)\}", cell)) else 1 for cell in cells]
                assert sum(spans) == columns, line
    assert latex_escape("m_1 & 5% #2 ~{x}") == r"m\_1 \& 5\% \#2 \textasciitilde{}\{x\}"


def test_plots_are_written_as_png_and_svg(report):
    _, out, written = report
    assert written["plots"] == [f"plots/{stem}.{suffix}" for stem in ("scores", "task_vs_strict", "process", "budget")
                                for suffix in ("png", "svg")]
    from PIL import Image

    for name in written["plots"]:
        path = out / name
        assert path.stat().st_size > 5000, name
        if name.endswith(".png"):
            with Image.open(path) as image:
                assert np.asarray(image.convert("L")).std() > 10
        else:
            assert path.read_text().lstrip().startswith("<?xml") and "<svg" in path.read_text()


def test_a_figure_saved_twice_gives_the_same_bytes(tmp_path):
    """A published report is rebuilt byte for byte: matplotlib salts every SVG id with a fresh uuid4 unless told."""
    from MedOpenClawLib.bench.report.canvas import pyplot, save

    written = []
    for folder in ("a", "b"):
        figure, axes = pyplot().subplots()
        axes.bar(["x", "y"], [1, 2])
        axes.set_title("scores")
        (tmp_path / folder).mkdir()
        written.append(save(figure, tmp_path / folder, "scores"))
    assert written[0] == written[1] == ["scores.png", "scores.svg"]
    for name in written[0]:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert "clip-path" in (tmp_path / "a" / "scores.svg").read_text()


def test_pages_are_relative_and_name_every_run(report):
    root, out, written = report
    pages = sorted(out.rglob("*.html"))
    assert len(pages) == 1 + 9 + written["episodes"]
    for page in pages:
        text = page.read_text()
        assert str(root) not in text and "file://" not in text
        for link in re.findall(r'(?:href|src)="([^"]+)"', text):
            assert not link.startswith(("/", "http:", "https:")), (page, link)
            assert (page.parent / link.split("#")[0]).resolve().is_file(), (page, link)
    index = (out / "index.html").read_text()
    for name in ("gpt/ucsf-A", "gpt/ucsf-C", "offline/oracle-bracs", "gpt-test", "heuristic", "montage"):
        assert name in index
    assert "oracle †" in index
    # the tables are markup, not text: every run page is linked from the runs table
    assert "&lt;" not in index.split("<main>")[1].split("</main>")[0].replace("&lt;report&gt;", "")
    runs_table = index.split('<table class="results runs">')[1].split("</table>")[0]
    assert len(re.findall(r'<a href="runs/[^"]+\.html">', runs_table)) == 9
    episode = (out / "runs" / "gpt__ucsf-A" / "U0__r1.html").read_text()
    assert "case package is not on this machine" in episode  # cases_dir of the fixture does not exist


def test_pages_never_show_local_absolute_paths(tmp_path):
    """Recorded text (arguments, error messages, answers) keeps file names but not this machine's folders."""
    import json as json_module

    root = cohort_of_runs(tmp_path / "runs")
    result_path = root / "gpt" / "ucsf-A" / "episodes" / "U0__r1" / "result.json"
    result = json_module.loads(result_path.read_text())
    result["response"] = f"I opened {tmp_path}/elsewhere/scan.nii.gz and /root/.cache/x/mask.nii.gz; see /v1/tools"
    result_path.write_text(json_module.dumps(result))
    write_report([root / "gpt" / "ucsf-A"], tmp_path / "report", evidence=False, figures=False)  # its run, its pages
    page = (tmp_path / "report" / "runs" / "ucsf-A" / "U0__r1.html").read_text()
    assert "…/scan.nii.gz" in page and "mask.nii.gz" in page and "/v1/tools" in page
    assert str(tmp_path) not in page and "/root/" not in page


def test_operators_called_are_the_agents_successful_operator_actions():
    records = [{"kind": "action", "actor": "agent", "action": "vista3d_segment", "status": "ok"},
               {"kind": "action", "actor": "agent", "action": "register_volumes", "status": "error"},
               {"kind": "action", "actor": "system", "action": "segment_region", "status": "ok"},
               {"kind": "action", "actor": "agent", "action": "observe", "status": "ok"}]
    assert operators_called(records) == {"vista3d_segment"}
    assert {"vista3d_segment", "register_volumes", "segment_region"} <= operator_names()


def test_a_trace_cannot_bring_other_files_into_the_report(tmp_path):
    import json as json_module

    root = cohort_of_runs(tmp_path / "runs")
    (tmp_path / "secret.png").write_bytes(b"not for the report")
    episode = root / "gpt" / "ucsf-A" / "episodes" / "U0__r1"
    record = {"kind": "action", "actor": "agent", "action": "observe", "status": "ok", "seq": 1, "arguments": {},
              "result": {"images": [{"view": "axial", "path": "../../../../../secret.png"}, "junk", {"path": 5}]}}
    (episode / "trace-1.jsonl").write_text(json_module.dumps(record) + "\n" + json_module.dumps(["junk"]) + "\n")
    result = json_module.loads((episode / "result.json").read_text())
    (episode / "result.json").write_text(json_module.dumps({**result, "trace": "episodes/U0__r1/trace-1.jsonl"}))
    write_report([root / "gpt" / "ucsf-A"], tmp_path / "report", evidence=False, figures=False)  # its run, its pages
    assert not [path for path in (tmp_path / "report").rglob("secret.png")]
    assert "observe" in (tmp_path / "report" / "runs" / "ucsf-A" / "U0__r1.html").read_text()


def test_find_runs_accepts_runs_and_folders_of_runs(tmp_path):
    root = cohort_of_runs(tmp_path)
    assert len(find_runs([root])) == 9
    single = find_runs([root / "gpt" / "ucsf-A"])
    assert run_names(single) == ["ucsf-A"]
    runs = [load_run(path, name) for path, name in zip(find_runs([root]), run_names(find_runs([root])))]
    assert [table.id for table in all_tables(runs)] == expected_tables(root)
    with pytest.raises(Exception, match="holds no bench run"):
        find_runs([tmp_path / "gpt" / "ucsf-A" / "episodes"])


def test_report_help_imports_no_viewer_or_plotting_stack():
    """`medopenclaw bench report --help` (and the report package itself) load without slicer, vtk, torch,
    matplotlib or jinja2: those are imported where they are used (evidence views, figures, pages)."""
    code = ("import sys\nfrom MedOpenClawLib.bench import report\nfrom MedOpenClawLib.cli import main\n"
            "try:\n    main(['bench', 'report', '--help'])\nexcept SystemExit:\n    pass\n"
            "from MedOpenClawLib.bench.report.runs import operators_called\n"  # Track B's operator names
            "assert operators_called([{'kind': 'action', 'actor': 'agent', 'action': 'quantify', 'status': 'ok'}])\n"
            "print('HEAVY', [m for m in ('slicer', 'vtk', 'torch', 'matplotlib', 'jinja2') if m in sys.modules])\n")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert "RUNS" in completed.stdout and "HEAVY []" in completed.stdout

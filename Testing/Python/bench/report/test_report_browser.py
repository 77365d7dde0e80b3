"""The report's pages in a real headless Chromium (Debian package; scripts/install_browser.sh installs it, CI's
.ci/run does): screenshots are not blank, no page prints markup as text, the index renders every table row of
results.json and links every run, and it does not overflow horizontally at 1400 px. Skipped when no Chromium
is installed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from report_runs import cohort_of_runs

from MedOpenClawLib.bench.report import write_report

ROOT = Path(__file__).resolve().parents[4]
spec = importlib.util.spec_from_file_location("check_report_browser", ROOT / "scripts" / "check_report_browser.py")
check_report_browser = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_report_browser)

pytestmark = pytest.mark.skipif(check_report_browser.browser() is None,
                                reason="no Chromium installed (scripts/install_browser.sh)")


def test_report_pages_render_in_chromium_without_overflow(tmp_path):
    root = cohort_of_runs(tmp_path / "runs")
    write_report([root], tmp_path / "report", evidence=False)
    verdict = check_report_browser.check(tmp_path / "report", tmp_path / "shots", docs=tmp_path / "docs" / "i.png",
                                         widths=(1400,))
    assert verdict["ok"], verdict["problems"]
    shots = verdict["screenshots"]
    assert {f"{page}_1400.png" for page in ("index", "run", "episode")} == set(shots)
    index = shots["index_1400.png"]
    assert index["scroll_width"] <= index["client_width"] == 1400
    assert index["table_rows"]["runs"] == 9 and index["table_rows"]["table1"] > 0
    assert (tmp_path / "docs" / "i.png").stat().st_size > 10000


def test_the_check_sees_overflow_and_blank_pages(tmp_path):
    report = tmp_path / "report"
    (report / "runs" / "run").mkdir(parents=True)
    (report / "index.html").write_text('<!doctype html><body><div style="width:2100px">wide</div></body>')
    (report / "runs" / "run.html").write_text("<!doctype html><body></body>")
    (report / "runs" / "run" / "e.html").write_text("<!doctype html><body>text</body>")
    verdict = check_report_browser.check(report, tmp_path / "shots", widths=(1400,))
    assert not verdict["ok"]
    assert any("overflows horizontally at 1400 px" in problem for problem in verdict["problems"])
    assert "run_1400.png is blank" in verdict["problems"]


def test_the_check_sees_tables_printed_as_text(tmp_path):
    """A fault seen once: the index escaped its tables' markup, so they showed as text without links."""
    report = tmp_path / "report"
    (report / "runs" / "run").mkdir(parents=True)
    table = '<section class="table-block" id="runs"><table class="results runs"><tbody><tr><th><a href="runs/' \
            'run.html">run</a></th></tr></tbody></table></section>'
    escaped = table.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    (report / "index.html").write_text(f"<!doctype html><body><h1>Report</h1><p>{escaped}</p></body>")
    (report / "results.json").write_text(json.dumps({"tables": [{"id": "runs", "sections": [{"rows": [{}]}]}]}))
    (report / "runs" / "run.html").write_text("<!doctype html><body><h1>Run</h1><pre>&lt;b&gt; verbatim</pre></body>")
    (report / "runs" / "run" / "e.html").write_text("<!doctype html><body><h1>Episode</h1></body>")
    verdict = check_report_browser.check(report, tmp_path / "shots", widths=(1400,))
    assert verdict["problems"] == ["index shows markup as text: '<section class=\"table-block\" id=\"runs\">'",
                                   "index renders 0 rows of table runs, results.json has 1",
                                   "the index's runs table links 0 of 1 run pages"]
    (report / "index.html").write_text(f"<!doctype html><body><h1>Report</h1>{table}</body>")
    assert check_report_browser.check(report, tmp_path / "shots", widths=(1400,))["ok"]

"""The report's pages in a real headless Chromium (Debian package; scripts/install_browser.sh installs it, CI's
.ci/run does): screenshots are not blank and the index does not overflow horizontally at 1400 px. Skipped when
no Chromium is installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from report_fixtures import cohort_of_runs

from MedOpenClawLib.bench.report import write_report

ROOT = Path(__file__).resolve().parents[2]
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

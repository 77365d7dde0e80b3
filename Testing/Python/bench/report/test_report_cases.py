"""The tables count cases: repeats and pooled runs add no cases, rejected episodes stay in n at 0, INVALID ones
leave with their reason, deltas are paired, Table 7 is bounded by tool calls, rows are grouped by model family."""

from __future__ import annotations

import json

import pytest
from report_runs import score, write_run
from scipy import stats

from MedOpenClawLib.bench.report.formats import markdown
from MedOpenClawLib.bench.report.runs import find_runs, load_run, run_names
from MedOpenClawLib.bench.report.stats import estimate, paired_difference
from MedOpenClawLib.bench.report.tables import table1, table6, table7


def load(root):
    paths = find_runs([root])
    return [load_run(path, name) for path, name in zip(paths, run_names(paths))]


def rows(table, **identity):
    return [row for section in table.sections for row in section.rows
            if all(row.identity.get(key) == value for key, value in identity.items())]


def ucsf(values, prefix="U"):
    return [score("ucsf-pdgm", f"{prefix}{k}", value, value, value) for k, value in enumerate(values)]


def test_rejected_episodes_score_0_within_n_and_invalid_ones_leave_with_their_reason(tmp_path):
    """The issue's Table 1 cell: 7 of 11 answered right and one rejected is 7/12 at n=12, not 7/11."""
    values = [1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    write_run(tmp_path, "gpt", "ucsf-pdgm", "model", ucsf(values), model="gpt-test", rejected=("U11",), invalid=1)
    table = table1.build(load(tmp_path))
    cell = rows(table, model="gpt-test")[0].cells["ucsf-pdgm:task"]
    assert (cell.estimate.n, cell.estimate.value) == (12, pytest.approx(7 / 12))
    exact = stats.binomtest(7, 12).proportion_ci(method="exact")
    assert cell.estimate.interval == pytest.approx((exact.low, exact.high), abs=1e-12)
    assert cell.denominator == {"left_out": {"INVALID: environment fault": 1}, "scored_zero": {"rejected": 1}}
    assert "12 (−1 INVALID: environment fault; 1 rejected = 0)" in markdown([table])
    assert any("INVALID" in note for note in table.notes) and any("Clopper-Pearson" in note for note in table.notes)


def test_every_final_model_side_outcome_stays_in_n_at_0(tmp_path):
    """model_length, a refusal and an answer that does not parse are final outcomes of the model: in n, at 0."""
    episodes = ucsf([1, 1, 0, 0, 0])
    episodes[4] = score("ucsf-pdgm", "U4", 0, 0, 0, parsed={"answer": None, "errors": ["no ANSWER line"]})
    run = write_run(tmp_path, "gpt", "ucsf-pdgm", "model", episodes, model="gpt-test")
    for episode_id, stop in (("U2__r3", "model_length"), ("U3__r4", "refused")):
        path = run / "episodes" / episode_id / "result.json"
        result = json.loads(path.read_text())
        result["outcome"]["stop_reason"] = stop
        path.write_text(json.dumps(result))
    cell = rows(table1.build(load(tmp_path)), model="gpt-test")[0].cells["ucsf-pdgm:strict"]
    assert (cell.estimate.n, cell.estimate.value) == (5, pytest.approx(0.4))
    assert cell.denominator == {"left_out": {}, "scored_zero": {"model_length": 1, "refused": 1, "unparseable": 1}}


def test_repeats_and_pooled_runs_add_no_cases(tmp_path):
    values = [1, 0, 0, 0, 0, 0]
    write_run(tmp_path, "single", "ucsf-pdgm", "model", ucsf(values), model="single", package="P")
    write_run(tmp_path, "repeated", "ucsf-pdgm", "model", ucsf(values) * 4, model="repeated", package="P")
    write_run(tmp_path, "pooled/a", "ucsf-pdgm", "model", ucsf(values), model="pooled", package="P")
    write_run(tmp_path, "pooled/b", "ucsf-pdgm", "model", ucsf(values) * 4, model="pooled", package="P")
    table = table1.build(load(tmp_path))
    cells = {model: rows(table, model=model)[0].cells["ucsf-pdgm:strict"].estimate
             for model in ("single", "repeated", "pooled")}
    assert [cell.n for cell in cells.values()] == [6, 6, 6]
    assert [cell.episodes for cell in cells.values()] == [6, 24, 30]
    assert cells["single"].interval == cells["repeated"].interval == cells["pooled"].interval
    assert cells["single"].low < cells["single"].high  # never a point
    text = markdown([table])
    assert "| 6 ×4 |" in text and "| 6 ×5 |" in text  # the pooled cell: 1 + 4 episodes per case


def test_deltas_are_paired_over_matched_cases_and_unmatched_cells_are_not_differenced(tmp_path):
    before = [0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0]
    after = [1, *before[1:]]
    write_run(tmp_path, "gpt/A", "ucsf-pdgm", "model", ucsf(before), model="gpt-test")
    write_run(tmp_path, "gpt/C", "ucsf-pdgm", "montage", ucsf(after), track="C", model="gpt-test")
    write_run(tmp_path, "other/A", "ucsf-pdgm", "model", ucsf(before, "X"), model="other")
    write_run(tmp_path, "other/C", "ucsf-pdgm", "montage", ucsf(after), track="C", model="other")
    table = table6.build(load(tmp_path))
    cell = rows(table, model="gpt-test")[0].cells["ucsf-pdgm:task"]
    expected = paired_difference(estimate(ucsf_pairs(after), "n"), estimate(ucsf_pairs(before), "r"), "d")
    assert cell.delta.value == pytest.approx(1 / 12) and cell.delta.n == 12 and cell.delta.low >= 0.0
    assert cell.delta.high - cell.delta.low == pytest.approx(expected.difference.high - expected.difference.low,
                                                             abs=0.2)
    other = rows(table, model="other")[0].cells["ucsf-pdgm:task"]
    assert other.delta is None and other.unmatched  # its Track A run scored other cases
    text = markdown([table])
    assert "12 paired)" in text and "not differenced: no shared case" in text
    assert "| gpt-test | openai | montage | C | — |" in text  # Track C has no rounds


def ucsf_pairs(values):
    return [(f"U{k}", float(value)) for k, value in enumerate(values)]


def test_table7_rows_are_the_tool_call_budgets_that_bounded_the_runs(tmp_path):
    for calls, values in ((3, [0, 0, 1]), (20, [1, 1, 0])):
        write_run(tmp_path, f"heuristic-{calls}", "ucsf-pdgm", "heuristic", ucsf(values), max_tool_calls=calls)
    write_run(tmp_path, "random", "ucsf-pdgm", "random", ucsf([0, 0, 0]))
    table = table7.build(load(tmp_path))
    budget_rows = [row for section in table.sections for row in section.rows]
    assert [row.header[4] for row in budget_rows] == ["20 rounds, 3 calls", "20 rounds, 20 calls"]
    assert [row.identity["max_tool_calls"] for row in budget_rows] == [[3], [20]]
    assert [row.cells["ucsf-pdgm:task"].estimate.value for row in budget_rows] == [pytest.approx(1 / 3),
                                                                                   pytest.approx(2 / 3)]
    main = table1.build(load(tmp_path))  # the main tables use the largest budget
    assert rows(main, agent="heuristic")[0].identity["max_tool_calls"] == [20]


def test_rows_are_grouped_by_model_family_and_scored_pipelines_are_labelled(tmp_path):
    write_run(tmp_path, "gpt", "ucsf-pdgm", "model", ucsf([1, 0]), model="gpt-5.5")
    write_run(tmp_path, "gemini", "ucsf-pdgm", "model", ucsf([1, 1]), model="gemini-3-pro")
    write_run(tmp_path, "medgemma", "ucsf-pdgm", "model", ucsf([0, 0]), model="google/medgemma-27b-it")
    write_run(tmp_path, "mine", "ucsf-pdgm", "model", ucsf([0, 1]), model="my-model", model_family="medical")
    write_run(tmp_path, "m3d", "ucsf-pdgm", "external", ucsf([0, 1]), track="C", model="M3D-LaMed")
    runs = load(tmp_path)
    sections = {section.title: [row.header[0] for row in section.rows] for section in table1.build(runs).sections}
    assert sections == {"General-purpose models": ["gemini-3-pro", "gpt-5.5", "Mean over reported"],
                        "Medical-domain models": ["google/medgemma-27b-it", "my-model", "Mean over reported"]}
    montage = table6.build(runs)
    assert [section.title for section in montage.sections] == [
        "Externally scored pipeline (bench score) · Native 3D VLMs, Alt. only"]
    assert montage.sections[0].rows[0].header[4] == "—"

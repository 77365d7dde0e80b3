"""`medopenclaw bench compare RUN_A RUN_B` as a user types it: paired differences, exact paired tests, the
Task - Strict gap, checked against scipy on the same cases."""

from __future__ import annotations

import json

import numpy as np
import pytest
from report_runs import score, write_run
from scipy import stats

from MedOpenClawLib.cli import main

A_TASK = [1, 1, 1, 1, 1, 0, 0, 1, 0, 1, 1, 0]
B_TASK = [0, 0, 0, 0, 1, 0, 1, 1, 0, 0, 1, 0]
A_STRICT = [1, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0]


def runs(tmp_path):
    first = [score("ucsf-pdgm", f"U{k}", task, strict, task) for k, (task, strict) in enumerate(zip(A_TASK, A_STRICT))]
    second = [score("ucsf-pdgm", f"U{k}", task, task, task) for k, task in enumerate(B_TASK)]
    nsclc_a = [score("nsclc", f"N{k}", value, 0.0, 0.0) for k, value in enumerate([0.6, 0.8, 0.4, 1.0, 0.6])]
    nsclc_b = [score("nsclc", f"N{k}", value, 0.0, 0.0) for k, value in enumerate([0.4, 0.8, 0.2, 0.6, 0.6])]
    write_run(tmp_path / "a", "ucsf", "ucsf-pdgm", "model", first, model="model-a")
    write_run(tmp_path / "a", "nsclc", "nsclc", "model", nsclc_a, model="model-a")
    write_run(tmp_path / "b", "ucsf", "ucsf-pdgm", "model", second, model="model-b")
    write_run(tmp_path / "b", "nsclc", "nsclc", "model", nsclc_b, model="model-b")
    return tmp_path / "a", tmp_path / "b"


def test_compare_prints_paired_differences_with_exact_tests(tmp_path, capsys):
    first, second = runs(tmp_path)
    assert main(["bench", "compare", str(first), str(second), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    task = body["modules"]["ucsf-pdgm"]["metrics"]["task"]
    assert task["difference"]["value"] == pytest.approx((sum(A_TASK) - sum(B_TASK)) / 12)
    assert task["difference"]["n"] == 12 and task["test"]["name"] == "McNemar exact"
    assert task["test"]["p_value"] == pytest.approx(stats.binomtest(5, 6, 0.5).pvalue)  # 5 gained, 1 lost
    nsclc = body["modules"]["nsclc"]["metrics"]["task"]
    assert nsclc["test"]["name"] == "sign-flip permutation"
    differences = np.array([0.2, 0.0, 0.2, 0.4, 0.0])
    expected = stats.permutation_test((differences[differences != 0],), np.mean, permutation_type="samples",
                                      n_resamples=np.inf).pvalue
    assert nsclc["test"]["p_value"] == pytest.approx(expected)
    gap = body["modules"]["ucsf-pdgm"]["task_strict_gap"]["a"]
    assert gap["value"] == pytest.approx((sum(A_TASK) - sum(A_STRICT)) / 12) and gap["n"] == 12
    assert gap["ci_low"] >= 0.0  # Strict never exceeds Task on a case: the paired gap cannot go below 0
    assert body["modules"]["ucsf-pdgm"]["task_strict_gap"]["b"]["value"] == 0.0

    assert main(["bench", "compare", str(first), str(second)]) == 0
    text = capsys.readouterr().out
    assert "ucsf-pdgm: 12 matched cases" in text and "McNemar exact p=" in text
    assert "Task - Strict gap: A +0.333" in text


def test_compare_refuses_runs_without_a_shared_module(tmp_path, capsys):
    write_run(tmp_path / "a", "ucsf", "ucsf-pdgm", "model", [score("ucsf-pdgm", "U0", 1, 1, 1)], model="m")
    write_run(tmp_path / "b", "bracs", "bracs", "model", [score("bracs", "B0", 1, 1, 1)], model="m")
    assert main(["bench", "compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert "share no module" in capsys.readouterr().err

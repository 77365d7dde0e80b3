"""Case-package integrity (manifest of agent-visible files) and the ground-truth self-consistency checker."""

from __future__ import annotations

import csv
import json
import os
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest
from agents_cases import write_ucsf_package

from MedOpenClawLib.bench import cohort_cache, integrity, modules
from MedOpenClawLib.bench.cases import GroundTruth, load_cases, load_ground_truth
from MedOpenClawLib.bench.cohort_cache import synthetic_cases
from MedOpenClawLib.bench.integrity import CaseIntegrityError, verify_case_files
from MedOpenClawLib.bench.modules.lumiere.lesions import lesion_fields
from MedOpenClawLib.bench.package import prepare
from MedOpenClawLib.bench.synthetic.cohort import CohortConfig, write_cohort
from MedOpenClawLib.bench.truth_check import check_ground_truth
from MedOpenClawLib.cli import main


@pytest.fixture()
def package(tmp_path):
    return write_ucsf_package(tmp_path / "cases", cases=2)


def test_manifest_records_every_agent_visible_file(package):
    case = load_cases(package)[0]
    on_disk = sorted(path.relative_to(package).as_posix() for path in case.data_root.rglob("*") if path.is_file())
    assert sorted(case.files) == on_disk and len(on_disk) == 4
    for relative, record in case.files.items():
        assert record["size"] == (package / relative).stat().st_size
        assert record["sha256"] == integrity.sha256_of(package / relative)
    assert not any("hidden" in relative for relative in case.files)
    verify_case_files(case)


@pytest.mark.parametrize("damage", ["truncate", "same_size_edit", "delete", "add"])
def test_changed_case_files_are_refused_with_the_file_named(package, damage):
    case = load_cases(package)[1]
    victim = case.data_root / f"{case.case_id}_T1c.nii.gz"
    verify_case_files(case)  # cached as verified
    if damage == "truncate":
        victim.write_bytes(victim.read_bytes()[:100])
    elif damage == "same_size_edit":
        data = bytearray(victim.read_bytes())
        data[-1] ^= 0xFF
        stat = victim.stat()
        victim.write_bytes(bytes(data))
        os.utime(victim, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    elif damage == "delete":
        victim.unlink()
    else:
        (case.data_root / "extra.nii.gz").write_bytes(b"x")
    with pytest.raises(CaseIntegrityError, match=case.case_id) as raised:
        verify_case_files(case)
    named = "extra.nii.gz" if damage == "add" else victim.name
    assert named in str(raised.value)


def test_verification_hashes_a_file_once_while_its_size_and_mtime_hold(package, monkeypatch):
    case = load_cases(package)[0]
    verify_case_files(case)
    calls = []
    monkeypatch.setattr(integrity, "sha256_of", lambda path: calls.append(path) or "")
    verify_case_files(case)
    assert calls == []


def test_case_without_file_records_is_refused(package):
    case = load_cases(package)[0]
    case.files = {}
    with pytest.raises(CaseIntegrityError, match="re-run bench prepare"):
        verify_case_files(case)


def test_checker_names_each_contradiction(package):
    case = load_cases(package)[0]
    truth = load_ground_truth(package, case.case_id)
    assert check_ground_truth(case, truth, modules.get(case.module)) == []
    body = truth.to_json()
    body["localization"]["ras_ranges"]["S"][1] += 5.0
    body["localization"]["reference_ras"] = [999.0, 999.0, 999.0]
    body["labels"]["answer"] = "No tumor"
    broken = GroundTruth.from_json(body, truth.hidden_dir)
    problems = check_ground_truth(case, broken, modules.get(case.module))
    assert any("ras_ranges[S]" in p for p in problems) and any("reference_ras" in p for p in problems)
    assert any("label says 'No tumor'" in p for p in problems)
    body = truth.to_json()
    body["localization"] = None
    assert check_ground_truth(case, GroundTruth.from_json(body, truth.hidden_dir), modules.get(case.module)) == [
        "a tumour answer has no localization"]


def test_lesion_rule_is_rano_bidimensional_on_two_slices_with_a_noise_floor():
    """Measurable = two perpendicular diameters >= 10 mm on >= 2 axial slices; a speck under 5 mm is no lesion."""
    current = np.zeros((30, 30, 6), dtype=np.uint8)
    current[2:7, 2:7, 1:3] = 1  # 10 x 10 mm on two slices: target, touching the old tumour
    old = np.zeros_like(current)
    old[2:4, 2:4, 1] = 3
    assert lesion_fields(old, current, (2.0, 2.0, 2.0), 1) == {
        "current_target_lesion": True, "new_target_lesion": False,
        "current_non_target_lesion": False, "new_non_target_lesion": False}
    current[20, 20, 4] = 1  # one 2 mm voxel (2.8 mm diagonal): segmentation noise, not a new lesion
    assert lesion_fields(old, current, (2.0, 2.0, 2.0), 1)["new_non_target_lesion"] is False
    current[12:17, 12:17, 4] = 1  # 10 x 10 mm on ONE slice only: non-measurable, new
    for k in range(8):  # a diagonal streak 16 mm long but one voxel wide: R and A extents >= 10 mm, still thin
        current[20 + k, 2 + k, 1:3] = 1
    fields = lesion_fields(old, current, (2.0, 2.0, 2.0), 1)
    assert fields == {"current_target_lesion": True, "new_target_lesion": False,
                      "current_non_target_lesion": True, "new_non_target_lesion": True}
    streak = np.zeros_like(current)
    streak[20:28, 2:10, 1:3] = np.eye(8, dtype=np.uint8)[:, :, None]
    assert lesion_fields(old, streak, (2.0, 2.0, 2.0), 1)["current_target_lesion"] is False
    assert set(lesion_fields(None, current, (2, 2, 2), 1).values()) == {None}


@dataclass(frozen=True)
class OneProcessCohort(CohortConfig):
    """A cohort whose cases the calling process writes: a pool's spawned workers would each import the generator
    and load the brain template again (2.3 s more CPU for the demo's lumiere), for the same files (each case is
    seeded on its own: synthetic.pool.run_jobs)."""

    workers: int = 1


def test_default_synthetic_lumiere_cohort_is_consistent(monkeypatch):
    """Seed 0 once had Patient-003 week-024 rated NonMeasurable while its mask held only measurable lesions: the
    default (demo) cohort's six cases, prepared as `bench run` caches them (the suite's own cohort has two), are
    all kept, each consistent."""
    monkeypatch.setattr(cohort_cache, "CohortConfig", OneProcessCohort)
    lumiere = modules.get("lumiere")
    package = synthetic_cases("lumiere", cases=6)
    assert len(json.loads((package / "manifest.json").read_text())["cases"]) == 6
    for case in load_cases(package):
        truth = load_ground_truth(package, case.case_id)
        assert check_ground_truth(case, truth, lumiere) == []
        assert truth.evidence_fields["non_measurable_lesion"] == truth.evidence_fields["current_non_target_lesion"]


def test_a_contradiction_excludes_only_its_case(tmp_path, capsys):
    """A case whose rating contradicts its masks is excluded with the contradiction as its reason, printed by
    `bench prepare` and in the manifest. Seed 0's six cases on 4 mm brains (a fifth of the demo's 2 mm CPU) hold
    one study without non-measurable lesions to rate as having some."""
    raw = tmp_path / "raw"
    # in this process: a pool's workers would add their imports to the CPU, for the same (seeded) files
    write_cohort(raw, CohortConfig(seed=0, cases=6, mri_spacing_mm=4, workers=1), modules=["lumiere"])
    lumiere = modules.get("lumiere")
    manifest = prepare(lumiere, raw / lumiere.dataset_dir, tmp_path / "cases")
    assert len(manifest["cases"]) == 6
    cases = load_cases(tmp_path / "cases")
    truths = {case.case_id: load_ground_truth(tmp_path / "cases", case.case_id) for case in cases}
    for case in cases:
        truth = truths[case.case_id]
        assert check_ground_truth(case, truth, lumiere) == []
        assert truth.evidence_fields["non_measurable_lesion"] == truth.evidence_fields["current_non_target_lesion"]
    counts = Counter(truth.labels["answer"] for truth in truths.values())
    filtered = prepare(lumiere, raw / lumiere.dataset_dir, tmp_path / "filtered", min_label_cases=2)
    rare = sum(count for count in counts.values() if count < 2)
    assert rare and filtered["filters"][-1] == {"step": "label frequency", "excluded": rare, "remaining": 6 - rare}
    # rate NonMeasurableLesions = yes on a study whose mask has no non-measurable lesion
    victim = next(case_id for case_id, truth in sorted(truths.items())
                  if truth.evidence_fields["current_non_target_lesion"] is False)
    patient, current = victim.split("__")[0], victim.split("__")[-1]
    rating = raw / lumiere.dataset_dir / "LUMIERE-ExpertRating-v202211.csv"
    rows = list(csv.reader(rating.read_text(encoding="utf-8").splitlines()))
    column = rows[0].index("NonMeasurableLesions")
    for row in rows:
        if row[:2] == [patient, current]:
            row[column] = "x"
    with open(rating, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    assert main(["bench", "prepare", "--module", "lumiere", "--source", str(raw / lumiere.dataset_dir),
                 "--out", str(tmp_path / "cases")]) == 0  # replaces the earlier package in place
    printed = capsys.readouterr()
    assert f"excluded {victim} (ground truth consistent with its masks): ground truth contradicts itself" in printed.err
    manifest = json.loads((tmp_path / "cases" / "manifest.json").read_text())
    (excluded,) = [item for item in manifest["skipped"] if item["case_id"] == victim]
    assert "NonMeasurableLesions = yes" in excluded["reason"] and len(manifest["cases"]) == 5
    assert manifest["filters"][-1] == {"step": "ground truth consistent with its masks", "excluded": 1,
                                       "remaining": 5}
    assert not (tmp_path / "cases" / "data" / victim).exists() and manifest["segmentation_labels"]["enhancing"] == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cases", "filtered", "raw"]  # no staging left

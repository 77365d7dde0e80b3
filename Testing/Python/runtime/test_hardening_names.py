"""Hostile names reaching the case pipeline (issue 23): CSV cells and manifest fields that name paths outside
the package, through the real CLI; the confined-path helper and the Ray packer's refusal of links."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from MedOpenClawLib.bench.cases import Case, CaseFormatError, load_ground_truth
from MedOpenClawLib.bench.modules import get
from MedOpenClawLib.bench.package import PackageWriter
from MedOpenClawLib.bench.ray_actor import pack_tree
from MedOpenClawLib.bench.ray_executor import CaseShipper
from MedOpenClawLib.cli import main
from MedOpenClawLib.core.names import UnsafeName, check_case_id, confined, name_problem, remove_confined
from MedOpenClawLib.worker.protocol import WorkerFault


def _victim(root: Path) -> Path:
    victim = root / "victim"
    victim.mkdir(parents=True)
    (victim / "precious.txt").write_text("keep me")
    return victim


def _csv(path: Path, rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(",".join(row) for row in rows) + "\n", encoding="utf-8")


def test_hostile_nsclc_subject_ids_are_skipped_through_bench_prepare_and_delete_nothing(tmp_path, capsys):
    victim = _victim(tmp_path)
    raw = tmp_path / "raw"
    hostile = [str(victim), "../../../victim", "..", "R01-\u202e002"]
    _csv(raw / "metadata.csv", [["Subject ID", "File Location"], *([case_id, "./x"] for case_id in hostile)])
    _csv(raw / "NSCLCR01Radiogenomic_DATA_LABELS_2018-05-22_1500-shifted.csv",
         [["Case ID", "Histology "], *([case_id, "Adenocarcinoma"] for case_id in hostile)])
    out = tmp_path / "pkg" / "cases"
    assert main(["bench", "prepare", "--module", "nsclc", "--source", str(raw), "--out", str(out)]) == 0
    assert (victim / "precious.txt").read_text() == "keep me"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["cases"] == []
    reasons = [item["reason"] for item in manifest["skipped"]]
    assert len(reasons) == 4 and all("is not a plain name" in reason for reason in reasons)
    assert sorted(os.listdir(out / "data")) == [] and sorted(os.listdir(out / "hidden")) == []


def _manifest(root: Path, case_id: str, data_dir: str | None = None) -> Path:
    body = {"module": "ucsf-pdgm", "case_id": case_id, "data_dir": data_dir or f"data/{case_id}",
            "open_paths": [data_dir or f"data/{case_id}"], "files": {}}
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.json").write_text(json.dumps({"format": 1, "module": "ucsf-pdgm", "cases": [body]}))
    return root


@pytest.mark.parametrize("case_id,data_dir", [("/abs/victim", None), ("../victim", None),
                                              ("C-1", "data/../../home/.ssh"), ("C-1", "/etc")])
def test_manifest_with_hostile_case_id_or_data_dir_is_refused_by_bench_score_and_bench_run(
        tmp_path, capsys, case_id, data_dir):
    victim = _victim(tmp_path)
    case_id = case_id.replace("/abs/victim", str(victim))
    package = _manifest(tmp_path / "pkg", case_id, data_dir)
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"case_id": case_id, "response": "{}"}) + "\n")
    out = tmp_path / "scores"
    assert main(["bench", "score", "--module", "ucsf-pdgm", "--cases", str(package), "--responses",
                 str(responses), "--out", str(out)]) != 0
    assert main(["bench", "run", "--module", "ucsf-pdgm", "--agent", "random", "--cases", str(package),
                 "--out", str(tmp_path / "run")]) != 0
    error = capsys.readouterr().err
    assert "not a plain name" in error or "data_dir must be" in error or "must be relative" in error
    assert sorted(os.listdir(victim)) == ["precious.txt"] and not (tmp_path / "victim.json").exists()
    assert not out.exists() or not list(out.iterdir())


def test_case_paths_stay_in_their_data_folder_even_through_a_link(tmp_path):
    package = tmp_path / "pkg"
    (package / "data").mkdir(parents=True)
    outside = _victim(tmp_path)
    (package / "data" / "C-1").symlink_to(outside)
    body = {"module": "ucsf-pdgm", "case_id": "C-1", "data_dir": "data/C-1", "open_paths": ["data/C-1"]}
    case = Case.from_json(body, package)
    with pytest.raises(CaseFormatError, match="leads outside"):
        assert case.data_root is None
    for field, value in (("open_paths", ["data/C-2"]), ("open_paths", ["data/C-1/../C-2"]),
                         ("slide", "/etc/passwd"), ("volumes", [{"name": "a", "path": "data", "modality": "MR"}])):
        with pytest.raises(CaseFormatError):
            Case.from_json({**body, field: value}, package)
    with pytest.raises(CaseFormatError):
        load_ground_truth(package, "../C-1")


def test_the_name_validator_and_confined_paths(tmp_path):
    for good in ("UCSF-PDGM-0004", "R01-001", "Patient-001__week-010__to__week-020", "patient_004_node_4"):
        assert check_case_id(good) == good
    for bad in ("", ".", "..", ".hidden", "-rf", "a/b", "a\\b", "x\n", "R01\u202e", "caf\udce9", 7, None, "a" * 200):
        with pytest.raises(UnsafeName):
            check_case_id(bad)
    assert name_problem("T1\u202egpj.nii") and name_problem("caf\udce9.nii") and name_problem("a\x1b[2J")
    assert name_problem("FLAIR.nii.gz") is None
    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(_victim(tmp_path))
    for parts in (("..",), ("a/../../x",), ("out", "precious.txt"), ("",)):
        with pytest.raises(UnsafeName):
            confined(root, *parts)
    remove_confined(root, "out")  # the link goes, never what it points to
    assert not (root / "out").exists() and (tmp_path / "victim" / "precious.txt").exists()
    with pytest.raises(UnsafeName):
        remove_confined(root)


def test_package_writer_builds_only_confined_paths(tmp_path):
    writer = PackageWriter(tmp_path / "cases", get("ucsf-pdgm"), tmp_path)
    victim = _victim(tmp_path)
    for hostile in (str(victim), "../../victim"):
        with pytest.raises(ValueError):
            writer.data_dir(hostile)
        writer.skip(hostile, "any reason")
    assert (victim / "precious.txt").exists() and len(writer.skipped) == 2


def test_ray_case_root_must_be_a_package_data_folder_without_links(tmp_path):
    package = tmp_path / "pkg"
    case_root = package / "data" / "C-1"
    case_root.mkdir(parents=True)
    (case_root / "T1.nii.gz").write_bytes(b"voxels")
    shipper = CaseShipper(package)
    assert list(shipper.expected(str(case_root))) == ["T1.nii.gz"]
    secret = _victim(tmp_path) / "precious.txt"
    for root in (tmp_path / "victim", package / "data" / ".." / ".." / "victim", package / "data"):
        with pytest.raises(WorkerFault, match="not a folder of the package"):
            shipper.expected(str(root))
    (case_root / "leak.nii.gz").symlink_to(secret)
    with pytest.raises(WorkerFault, match="is a link"):
        CaseShipper(package).expected(str(case_root))
    with pytest.raises(ValueError, match="is a link"):
        pack_tree(case_root)
    (case_root / "leak.nii.gz").unlink()
    (package / "data" / "C-2").symlink_to(tmp_path / "victim", target_is_directory=True)
    with pytest.raises(WorkerFault):
        shipper.expected(str(package / "data" / "C-2"))

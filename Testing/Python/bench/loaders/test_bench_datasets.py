"""The datasets as distributed, through the command line: tiny trees in the real layouts (dataset_layouts.py)
go through `bench prepare`, `bench score` and `bench run`, with hand-computed scores."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from dataset_layouts import HOLE, TUMOUR, nsclc_clinical, write_camelyon, write_lumiere, write_nbia_nsclc

from MedOpenClawLib.bench import package as package_module
from MedOpenClawLib.bench.cases import load_cases, load_ground_truth
from MedOpenClawLib.cli import main

ONE_STUDY = [("09-06-1990", [("CT", "CT CHEST"), ("PT", "PET AC")])]


def _prepare(module: str, source: Path, out: Path, capsys, *flags: str) -> tuple[int, dict, str]:
    code = main(["bench", "prepare", "--module", module, "--source", str(source), "--out", str(out), *flags])
    printed = capsys.readouterr()
    manifest = json.loads((out / "manifest.json").read_text()) if (out / "manifest.json").exists() else {}
    return code, manifest, printed.err


def _score(module: str, package: Path, responses: dict[str, str], tmp_path: Path, capsys) -> tuple[dict, dict]:
    """`bench score` of ``responses``: (the summary it prints, case id -> the per-case score it wrote)."""
    path = tmp_path / f"{module}_answers.jsonl"
    path.write_text("".join(json.dumps({"case_id": case_id, "response": text}) + "\n"
                            for case_id, text in responses.items()))
    assert main(["bench", "score", "--module", module, "--cases", str(package), "--responses", str(path)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    episodes = tmp_path / f"{module}_answers_scores" / "episodes"
    scores = {folder.name.removesuffix("__r1"): json.loads((folder / "result.json").read_text())["score"]
              for folder in episodes.iterdir()}
    assert json.loads((episodes.parent / "summary.json").read_text())["task"] == summary["task"]
    return summary, scores


@pytest.fixture(scope="module")
def nsclc(tmp_path_factory):
    """An NBIA download: R01-001 imaged twice (grade "Not Collected"), R01-002 "Unknown" location and T "Tis",
    R01-003 two lobes ticked; R01-004 without SEG, R01-005 without a clinical row, R01-006 without PET, AMC-001."""
    root = tmp_path_factory.mktemp("nsclc")
    two_studies = [*ONE_STUDY, ("03-11-1991", [("CT", "CT CHEST"), ("PT", "PET AC")])]
    subjects = [
        {"case_id": "R01-001", "clinical": nsclc_clinical("R01-001", t_stage="T2a", grade="Not Collected"),
         "studies": two_studies},
        {"case_id": "R01-002", "clinical": nsclc_clinical("R01-002", lobes=("Unknown",), t_stage="Tis"),
         "studies": ONE_STUDY},
        {"case_id": "R01-003", "clinical": nsclc_clinical("R01-003", lobes=("RUL", "RML")), "studies": ONE_STUDY},
        {"case_id": "R01-004", "clinical": nsclc_clinical("R01-004"), "studies": ONE_STUDY, "seg": False},
        {"case_id": "R01-005", "clinical": None, "studies": ONE_STUDY},
        {"case_id": "R01-006", "clinical": nsclc_clinical("R01-006"),
         "studies": [("09-06-1990", [("CT", "CT CHEST")])]},
        {"case_id": "AMC-001", "clinical": nsclc_clinical("AMC-001"), "studies": ONE_STUDY},
    ]
    return write_nbia_nsclc(root / "raw", subjects), root


def test_nsclc_prepare_keeps_unscorable_questions_loads_every_series_and_counts_exclusions(nsclc, capsys):
    raw, root = nsclc
    code, manifest, printed = _prepare("nsclc", raw, root / "cases", capsys)
    assert code == 0
    assert [case["case_id"] for case in manifest["cases"]] == ["R01-001", "R01-002", "R01-003"]
    assert [(row["step"], row["excluded"], row["remaining"]) for row in manifest["filters"]] == [
        ("candidates", 0, 7), ("exclude AMC (default)", 1, 6), ("clinical row", 1, 5),
        ("DICOM SEG tumour mask on its CT", 1, 4), ("PET and CT series", 1, 3)]
    assert "paper (Table 4)" in printed and "162" in printed
    assert "excluded R01-004 (DICOM SEG tumour mask on its CT): no DICOM SEG tumour mask" in printed
    # every CT and PET of both studies, named as the viewer names repeated descriptions
    case = {case.case_id: case for case in load_cases(root / "cases")}["R01-001"]
    assert [(volume.name, volume.role) for volume in case.volumes] == [
        ("CT_CHEST", "diagnostic_ct"), ("PET_AC", "pet"), ("CT_CHEST_2", "ct"), ("PET_AC_2", "pet")]
    assert sorted(path.name for path in case.data_root.iterdir()) == ["CT_CHEST", "CT_CHEST_2", "PET_AC", "PET_AC_2"]
    truths = {case_id: load_ground_truth(root / "cases", case_id) for case_id in ("R01-001", "R01-002", "R01-003")}
    assert truths["R01-001"].answers == {"q1": "A", "q2": "B", "q3": "A", "q4": "A", "q5": None}
    assert truths["R01-002"].answers["q1"] is None and truths["R01-002"].answers["q2"] is None
    assert truths["R01-002"].labels["q1"] == "Unknown (not in the paper's label set: not scored)"
    assert truths["R01-003"].labels["q1"] == "RUL + RML (not in the paper's label set: not scored)"


def _evidence(package: Path, case_id: str, ijk: tuple[float, float, float]) -> str:
    """An evidence block whose RAS point is voxel index ``ijk`` of the hidden mask and whose key slices sit on
    the high ends of the mask's ranges (both on boundary faces)."""
    truth = load_ground_truth(package, case_id)
    r, a, s = (nib.load(truth.mask_path).affine @ np.array([*ijk, 1.0]))[:3]
    ranges = truth.localization["ras_ranges"]
    return (f"KEY_SLICE_AXIAL_MM: {ranges['S'][1]}\nKEY_SLICE_SAGITTAL_MM: {ranges['R'][1]}\n"
            f"KEY_SLICE_CORONAL_MM: {ranges['A'][1]}\nRAS: [{r:.4f}, {a:.4f}, {s:.4f}] mm (voxel 9, 7, 2 of 16)\n")


def test_nsclc_scores_through_the_cli_with_unscored_questions(nsclc, tmp_path, capsys):
    raw, root = nsclc
    package = root / "cases"
    if not (package / "manifest.json").exists():
        assert _prepare("nsclc", raw, package, capsys)[0] == 0
    # the mask's columns 6..9: index 9.5 is its high-index outer face (inside), 10.5 a voxel beyond (outside)
    summary, scores = _score("nsclc", package, {
        "R01-001": "Lesion in the right upper lobe.\n" + _evidence(package, "R01-001", (9.5, 7, 2))
                   + "1A, 2B, 3A, 4A, 5C",
        "R01-002": _evidence(package, "R01-002", (10.5, 7, 2)) + "1: A; 2: A; 3: A; 4: A; 5: B",
    }, tmp_path, capsys)
    assert summary["n"] == 3 and summary["missing"] == 1
    first, second = scores["R01-001"], scores["R01-002"]
    assert first["task"] == 1.0 and first["strict"] == 1.0 and first["loc"] == 1.0  # q5 unscored: 4 of 4
    assert first["details"]["questions"]["q5"] is None and first["gates"]["ras_in_mask"] is True
    assert second["task"] == 1.0 and second["strict"] == 0.0 and second["loc"] == 0.0  # q3-q5 of 3, RAS outside
    # per question over the cases where it is scored: q1 R01-001 only; q2 R01-001 1 / R01-003 0 (unanswered);
    # q5 R01-002 1 / R01-003 0
    assert (summary["q1"], summary["q2"], summary["q5"]) == (1.0, 0.5, 0.5)
    assert summary["task"] == round(2 / 3, 4) and summary["strict"] == round(1 / 3, 4)


def test_nsclc_bench_run_finishes_with_a_summary(nsclc, tmp_path, capsys):
    raw, root = nsclc
    package = root / "cases"
    if not (package / "manifest.json").exists():
        assert _prepare("nsclc", raw, package, capsys)[0] == 0
    assert main(["bench", "run", "--module", "nsclc", "--agent", "oracle", "--cases", str(package),
                 "--limit", "2", "--out", str(tmp_path / "run")]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n"] == 2 and summary["strict"] == 1.0 and summary["loc"] == 1.0  # names match the viewer's
    assert summary["q5"] == 1.0 and summary["q1"] == 1.0 and summary["q2"] == 1.0  # each over its scored case


@pytest.mark.parametrize("layout", ["challenge", "gigascience"])
def test_camelyon_both_layouts_with_holes_and_unknown_groups(layout, tmp_path, capsys):
    raw = write_camelyon(tmp_path / "raw", layout, {
        "patient_004_node_1": ("macro", [("_0", TUMOUR), ("normal", HOLE)]),
        "patient_004_node_2": ("negative", []),
        "patient_004_node_3": ("micro", [("Mystery", HOLE), ("Tumor", TUMOUR)]),
        "patient_004_node_4": ("itc", []),  # a positive slide without XML: no ground-truth evidence source
    })
    code, manifest, printed = _prepare("camelyon17", raw, tmp_path / "cases", capsys)
    assert code == 0 and len(manifest["cases"]) == 4 and manifest["skipped"] == []
    assert "note: ASAP group 'Mystery' (1 polygon(s)) is neither tumour nor exclusion" in printed
    truth = load_ground_truth(tmp_path / "cases", "patient_004_node_1")
    assert [region["kind"] for region in truth.regions] == ["tumor", "exclusion"]  # "normal" = a hole
    inside_hole, tumour_edge = [120.0, 120.0], [200.0, 50.0]
    answer = '{{"tumor_presence": "tumor_present", "largest_metastasis": "{}", "localizations": [{}]}}'
    summary, scores = _score("camelyon17", tmp_path / "cases", {
        "patient_004_node_1": answer.format("macro", json.dumps(inside_hole)),
        "patient_004_node_3": answer.format("micro", json.dumps(tumour_edge)),
        "patient_004_node_4": answer.format("itc", ""),
    }, tmp_path, capsys)
    node_1, node_3, node_4 = (scores[f"patient_004_node_{n}"] for n in (1, 3, 4))
    assert node_1["task"] == 1.0 and node_1["strict"] == 0.0  # a click in the hole is not on tumour
    assert node_3["task"] == 1.0 and node_3["strict"] == 1.0  # a click on the polygon edge is a hit
    assert node_4["task"] == 1.0 and node_4["strict"] == 1.0 and node_4["loc"] is None  # Strict = Task (Table 4)
    # Strict over all four slides (node_2 negative, unanswered: 0); Loc over the two slides with polygons
    assert summary["n"] == 4 and summary["strict"] == 0.5 and summary["loc"] == 0.5 and summary["loc_n"] == 2


# integer ASAP coordinates (a Tumor ``_0`` holding an Exclusion ``_2``) on which the earlier horizontal-margin
# scan put the reference point, rounded, onto the exclusion and dropped the whole slide
BLOB = [[120, 100], [118, 111], [114, 116], [102, 125], [93, 122], [81, 113], [82, 105], [79, 95], [84, 85],
        [92, 78], [102, 81], [111, 85], [121, 91]]
BLOB_EXCLUSION = [[102, 94], [94, 100], [86, 94], [94, 87]]


def test_camelyon_keeps_every_slide_with_a_region_left_and_counts_the_regions_it_drops(tmp_path, capsys):
    raw = write_camelyon(tmp_path / "raw", "challenge", {
        "patient_005_node_0": ("micro", [("_0", BLOB), ("_2", BLOB_EXCLUSION)]),
        # the second tumour polygon lies wholly inside an exclusion: dropped, the first one remains
        "patient_005_node_1": ("macro", [("Tumor", TUMOUR), ("Tumor", HOLE), ("Exclusion", HOLE)]),
        "patient_005_node_2": ("itc", [("_0", HOLE), ("_2", TUMOUR)]),  # nothing of the tumour remains
    })
    code, manifest, _ = _prepare("camelyon17", raw, tmp_path / "cases", capsys)
    assert code == 0 and [case["case_id"] for case in manifest["cases"]] == ["patient_005_node_0",
                                                                             "patient_005_node_1"]
    (skipped,) = manifest["skipped"]
    assert skipped["case_id"] == "patient_005_node_2" and "no usable reference region remains" in skipped["reason"]
    assert manifest["dropped_regions"] == {"tumor region: nothing of the region remains outside the exclusions": 2}
    kept = load_ground_truth(tmp_path / "cases", "patient_005_node_1")
    assert [region["kind"] for region in kept.regions] == ["tumor", "exclusion"]
    reference = load_ground_truth(tmp_path / "cases", "patient_005_node_0").regions[0]["reference_point"]
    answer = '{{"tumor_presence": "tumor_present", "largest_metastasis": "micro", "localizations": [{}]}}'
    _, scores = _score("camelyon17", tmp_path / "cases", {
        "patient_005_node_0": answer.format(json.dumps(reference))}, tmp_path, capsys)
    assert scores["patient_005_node_0"]["strict"] == 1.0  # the reference point itself is a hit


def test_bracs_roi_holes_from_geojson_interior_rings_are_misses(tmp_path, capsys):
    from PIL import Image

    from MedOpenClawLib.bench.modules.bracs.synthetic import deterministic_xlsx
    from MedOpenClawLib.bench.synthetic.slide_layout import write_pyramid

    raw = tmp_path / "raw"
    write_pyramid(raw / "BRACS_WSI" / "test" / "Group_AT" / "Type_DCIS" / "BRACS_9.svs",
                  Image.new("RGB", (320, 256), (230, 180, 200)), mpp=0.5, aperio=True, levels=2)
    ring = [[*point, 0.0] for point in TUMOUR + TUMOUR[:1]]  # closed GeoJSON rings, with a z as QuPath may write
    feature = {"type": "Feature", "properties": {"objectType": "annotation", "classification": {"name": "DCIS"}},
               "geometry": {"type": "MultiPolygon", "coordinates": [[ring, HOLE + HOLE[:1]]]}}
    (raw / "BRACS_9.geojson").write_text(json.dumps({"type": "FeatureCollection", "features": [feature]}))
    (raw / "BRACS.xlsx").write_bytes(deterministic_xlsx(
        [["WSI Filename", "Set", "WSI label"], ["BRACS_9.svs", "test", "DCIS"]], "WSI_Information"))
    assert _prepare("bracs", raw, tmp_path / "cases", capsys)[0] == 0
    (region,) = load_ground_truth(tmp_path / "cases", "BRACS_9").regions
    assert region["polygon"] == TUMOUR and region["holes"] == [HOLE]
    answer = '{{"selected_option": "F", "wsi_label": "DCIS", "localizations": [{}]}}'
    in_hole, in_ring = [120.0, 120.0], [50.0, 120.0]
    _, scores = _score("bracs", tmp_path / "cases", {"BRACS_9": answer.format(json.dumps(in_hole))}, tmp_path, capsys)
    assert (scores["BRACS_9"]["strict"], scores["BRACS_9"]["loc"]) == (0.0, 0.0)
    _, scores = _score("bracs", tmp_path / "cases", {"BRACS_9": answer.format(json.dumps(in_ring))}, tmp_path, capsys)
    assert (scores["BRACS_9"]["strict"], scores["BRACS_9"]["loc"]) == (1.0, 1.0)


def _lumiere_studies() -> dict[str, np.ndarray]:
    baseline = np.zeros((30, 30, 8), dtype=np.uint8)
    baseline[5:17, 5:17, 2:5] = 1  # 12 x 12 mm on three slices: measurable
    baseline[4:18, 4:18, 1] = 3
    progressed = baseline.copy()
    progressed[4:18, 4:18, 2:5] = 1  # grown
    progressed[25, 25, 6] = 1  # one 1 mm voxel of the automatic mask far from the tumour: noise, not a new lesion
    return {"week-000": baseline, "week-010": progressed, "week-020": progressed}


def test_lumiere_rano_sizes_t2_negation_and_a_contradiction_that_excludes_one_case(tmp_path, capsys):
    raw = write_lumiere(tmp_path / "raw", _lumiere_studies(), [
        ["Patient-001", "week-000", "", "", "Pre-Op", ""],
        ["Patient-001", "week-010", "", "", "PD", "L1 size change, no T2-Progr."],
        # the expert saw a non-measurable lesion the automatic mask does not hold: that case cannot be scored
        ["Patient-001", "week-020", "", "x", "SD", "T2-Progr."],
    ])
    out = tmp_path / "cases"
    code, manifest, printed = _prepare("lumiere", raw, out, capsys)
    assert code == 0 and [case["case_id"] for case in manifest["cases"]] == ["Patient-001__week-000__to__week-010"]
    (excluded,) = manifest["skipped"]
    assert excluded["case_id"] == "Patient-001__week-010__to__week-020"
    assert excluded["step"] == "ground truth consistent with its masks" and "NonMeasurableLesions" in excluded["reason"]
    assert "excluded Patient-001__week-010__to__week-020 (ground truth consistent with its masks)" in printed
    fields = load_ground_truth(out, "Patient-001__week-000__to__week-010").evidence_fields
    assert fields == {"non_measurable_lesion": False, "t2_progression": False, "current_target_lesion": True,
                      "new_target_lesion": False, "current_non_target_lesion": False,
                      "new_non_target_lesion": False}
    summary, _ = _score("lumiere", out, {"Patient-001__week-000__to__week-010": "\n".join(
        [f"{name.upper()}: {'YES' if value else 'NO'}" for name, value in fields.items()] + ["ANSWER: A"])},
        tmp_path, capsys)
    assert summary["task"] == 1.0 and summary["strict"] == 1.0 and summary["t2_progression"] == 1.0


def test_lumiere_image_space_is_a_recorded_condition_and_never_mixed_within_a_pair(tmp_path, capsys):
    """A study without DeepBraTumIA's atlas skull-strip takes no native scans in their place: its pairs leave the
    atlas package with each study's spaces as the reason, and the native package holds them as the control."""
    raw = write_lumiere(tmp_path / "raw", _lumiere_studies(), [
        ["Patient-001", "week-010", "", "", "PD", "L1 size change"],
        ["Patient-001", "week-020", "", "", "SD", "stable L"],
    ])
    shutil.rmtree(raw / "Imaging" / "Patient-001" / "week-020" / "DeepBraTumIA-segmentation" / "atlas" / "skull_strip")
    code, manifest, printed = _prepare("lumiere", raw, tmp_path / "atlas", capsys)
    assert code == 0 and [case["image_space"] for case in manifest["cases"]] == ["atlas"]
    (excluded,) = manifest["skipped"]
    assert excluded == {"case_id": "Patient-001__week-010__to__week-020",
                        "reason": "studies not both in atlas space (OLD week-010: atlas and native; CURRENT week-020: "
                                  "native) (`bench prepare --images native` scores the pair as the unregistered "
                                  "control)", "step": "both studies in the requested image space"}
    assert "image space atlas: 1 cases" in printed
    case_id = "Patient-001__week-000__to__week-010"
    assert load_ground_truth(tmp_path / "atlas", case_id).image_space == "atlas"
    assert load_cases(tmp_path / "atlas")[0].image_space == "atlas"

    code, manifest, printed = _prepare("lumiere", raw, tmp_path / "native", capsys, "--images", "native")
    assert code == 0 and manifest["skipped"] == [] and manifest["images"] == "native"
    assert [case["image_space"] for case in manifest["cases"]] == ["native", "native"]
    assert "image space native: 2 cases" in printed
    assert load_ground_truth(tmp_path / "native", case_id).image_space == "native"
    native = nib.load(tmp_path / "native" / "data" / case_id / "CURRENT_CT1.nii.gz")
    assert native.affine[0, 3] == 3.0  # week-010's own scanner offset, not the atlas grid

    answers = {case_id: "\n".join(["NON_MEASURABLE_LESION: NO", "ANSWER: A"])}
    _score("lumiere", tmp_path / "native", answers, tmp_path, capsys)
    run = json.loads((tmp_path / "lumiere_answers_scores" / "run.json").read_text())
    assert run["image_space"] == "native"


def test_a_failed_prepare_leaves_the_earlier_package_and_no_staging(tmp_path, capsys, monkeypatch):
    raw = write_lumiere(tmp_path / "raw", _lumiere_studies(), [["Patient-001", "week-010", "", "", "PD", ""]])
    out = tmp_path / "cases"
    assert _prepare("lumiere", raw, out, capsys)[0] == 0
    before = (out / "manifest.json").read_bytes()
    calls = []

    def failing_place(source, target):
        calls.append(target)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real_place(source, target)

    real_place = package_module.place_file
    monkeypatch.setattr("MedOpenClawLib.bench.modules.lumiere.loader.place_file", failing_place)
    code, _, printed = _prepare("lumiere", raw, out, capsys)
    assert code == 2 and "No space left on device" in printed
    assert (out / "manifest.json").read_bytes() == before and len(load_cases(out)) == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cases", "raw"]
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("keep")
    code, _, printed = _prepare("lumiere", raw, tmp_path / "notes", capsys)
    assert code == 2 and "is not a case package" in printed and (tmp_path / "notes" / "mine.txt").exists()


@pytest.mark.parametrize(("module", "text", "key", "expected"), [
    ("nsclc", "RAS: [12.5, -3, 40] mm (voxel 120, 88, 45)\n1C, 2D, 3B, 4A, 5B", "ras", [12.5, -3.0, 40.0]),
    ("ucsf-pdgm", "RAS: R 12.5, A -3, S 40 (slice 45 of 90)\nANSWER: A", "ras", [12.5, -3.0, 40.0]),
    ("nsclc", "1: C; 2: D; 3: B; 4: A; 5: B", "answers", {"q1": "C", "q2": "D", "q3": "B", "q4": "A", "q5": "B"}),
])
def test_parse_reads_ras_lines_with_extra_numbers_and_compact_answers_with_commas(module, text, key, expected,
                                                                                   monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    assert main(["bench", "parse", "--module", module]) == 0
    parsed = json.loads(capsys.readouterr().out)
    assert (parsed["evidence"]["ras"] if key == "ras" else parsed[key]) == expected


def test_scored_external_answers_are_a_report_row_and_different_packages_warn(nsclc, tmp_path, capsys):
    """Table 6's externally scored rows (M3D, RadFM): `bench score --name` writes a run folder `bench report`
    reads; the same pipeline scored on two different packages is pooled only with a warning."""
    raw, root = nsclc
    package = root / "cases"
    if not (package / "manifest.json").exists():
        assert _prepare("nsclc", raw, package, capsys)[0] == 0
    with_amc = tmp_path / "with_amc"
    assert _prepare("nsclc", raw, with_amc, capsys, "--include-amc")[0] == 0
    answers = tmp_path / "m3d.jsonl"
    answers.write_text(json.dumps({"case_id": "R01-001", "response": "1A2B3A4A5C"}) + "\n")
    for cases, out in ((package, "m3d_a"), (with_amc, "m3d_b")):
        assert main(["bench", "score", "--module", "nsclc", "--cases", str(cases), "--responses", str(answers),
                     "--name", "M3D", "--out", str(tmp_path / "scored" / out)]) == 0
    capsys.readouterr()
    assert main(["bench", "report", str(tmp_path / "scored" / "m3d_a"), "--no-evidence",
                 "--out", str(tmp_path / "report")]) == 0
    assert "warning" not in capsys.readouterr().err
    table6 = next(table for table in json.loads((tmp_path / "report" / "results.json").read_text())["tables"]
                  if table["id"] == "table6")
    (section,) = table6["sections"]
    (row,) = section["rows"]
    assert section["title"].startswith("Externally scored pipeline (bench score)") and row["header"][0] == "M3D"
    assert section["title"].endswith("Alt. only")  # Track C pipelines answer the alternative form only
    assert row["cells"]["nsclc:task"]["value"] == pytest.approx(1 / 3, abs=1e-4)  # 4/4 on one of three cases
    assert main(["bench", "report", str(tmp_path / "scored"), "--no-evidence", "--out", str(tmp_path / "both")]) == 0
    assert "M3D on track C, nsclc: pooling runs of 2 different case packages" in capsys.readouterr().err


def test_a_run_folder_with_more_episodes_than_its_limit_is_reported_within_the_limit(tmp_path, capsys):
    from agents_cases import write_ucsf_package

    cases = write_ucsf_package(tmp_path / "cases", cases=2)
    run = tmp_path / "run"
    for limit in ("2", "1"):
        assert main(["bench", "run", "--module", "ucsf-pdgm", "--agent", "oracle", "--cases", str(cases),
                     "--limit", limit, "--out", str(run)]) == 0
    assert len(list((run / "episodes").iterdir())) == 2
    capsys.readouterr()
    assert main(["bench", "report", str(run), "--no-evidence", "--out", str(tmp_path / "report")]) == 0
    runs = json.loads((tmp_path / "report" / "results.json").read_text())["runs"]
    assert [(record["episodes"], record["scored"]) for record in runs] == [(1, 1)]


def test_bracs_slide_without_an_roi_of_its_class_has_strict_equal_to_task(tmp_path, capsys):
    from PIL import Image

    from MedOpenClawLib.bench.modules.bracs.synthetic import deterministic_xlsx, geojson_export
    from MedOpenClawLib.bench.synthetic.slide_layout import write_pyramid

    raw = tmp_path / "raw"
    for slide_id, folder in (("BRACS_7", "Type_ADH"), ("BRACS_8", "Type_DCIS")):
        write_pyramid(raw / "BRACS_WSI" / "val" / "Group_AT" / folder / f"{slide_id}.svs",
                      Image.new("RGB", (320, 256), (230, 180, 200)), mpp=0.5, aperio=True, levels=2)
    (raw / "BRACS_WSI" / "val" / "Group_AT" / "Type_DCIS" / "BRACS_8.geojson").write_text(
        json.dumps(geojson_export([("DCIS", TUMOUR)])))
    (raw / "BRACS.xlsx").write_bytes(deterministic_xlsx(
        [["WSI Filename", "Set", "WSI label"], ["BRACS_7.svs", "val", "ADH"], ["BRACS_8.svs", "val", "DCIS"]],
        "WSI_Information"))
    code, manifest, _ = _prepare("bracs", raw, tmp_path / "cases", capsys)
    assert code == 0 and manifest["class_counts"]["ADH"] == {"cases": 1, "evidence_available": 0}
    answer = '{{"selected_option": "{}", "wsi_label": "{}", "localizations": [[300, 250]]}}'
    summary, scores = _score("bracs", tmp_path / "cases", {"BRACS_7": answer.format("E", "ADH"),
                                                           "BRACS_8": answer.format("F", "DCIS")}, tmp_path, capsys)
    assert scores["BRACS_7"]["strict"] == 1.0 and scores["BRACS_7"]["loc"] is None  # no ADH ROI: Strict = Task
    assert scores["BRACS_8"]["strict"] == 0.0 and scores["BRACS_8"]["loc"] == 0.0  # the click misses its ROI
    assert (summary["task"], summary["strict"], summary["loc"]) == (1.0, 0.5, 0.0)


def test_track_b_one_operation_at_a_time_and_table3_in_its_published_layout(tmp_path, capsys):
    """`--operators` offers only that operation's operators; Table 3 has MedFlow-Bench's (operation, module) columns,
    and Registration on LUMIERE is compared with the unregistered control (Track A on native scans)."""
    raw = write_lumiere(tmp_path / "raw", _lumiere_studies(), [
        ["Patient-001", "week-010", "", "", "PD", "L1 size change"],
        ["Patient-001", "week-020", "", "", "SD", "stable L"]])
    for space in ("atlas", "native"):
        code, manifest, _ = _prepare("lumiere", raw, tmp_path / space, capsys, "--images", space)
        assert code == 0 and manifest["images"] == space and len(manifest["cases"]) == 2
    native_case = load_cases(tmp_path / "native")[0]
    assert nib.load(native_case.path(native_case.volumes[0].path)).affine[0, 3] == 0.0  # OLD: its own space
    assert nib.load(native_case.path(native_case.volumes[-1].path)).affine[0, 3] == 3.0  # CURRENT: shifted
    runs = tmp_path / "runs"
    for name, package, flags in (("a_atlas", "atlas", ["--limit", "1"]), ("a_native", "native", []),
                                 ("b_registration", "native", ["--track", "B", "--operators", "registration",
                                                               "--limit", "1"]),
                                 ("b_segmentation", "atlas", ["--track", "B", "--operators", "segmentation",
                                                              "--limit", "1"])):
        assert main(["bench", "run", "--module", "lumiere", "--agent", "oracle", "--cases", str(tmp_path / package),
                     *flags, "--out", str(runs / name)]) == 0, name
    trace = next((runs / "b_registration" / "episodes").rglob("trace-*.jsonl"))
    offered = next(record["payload"]["tools"] for record in map(json.loads, trace.read_text().splitlines())
                   if isinstance(record.get("payload"), dict) and "tools" in record["payload"])
    assert {"register_volumes", "apply_transform", "resample_volume"} <= set(offered)
    assert not {"vista3d_segment", "segment_region", "quantify"} & set(offered)
    assert json.loads((runs / "b_registration" / "run.json").read_text())["operation"] == "registration"
    capsys.readouterr()
    assert main(["bench", "report", str(runs), "--no-evidence", "--out", str(tmp_path / "report")]) == 0
    table3 = next(table for table in json.loads((tmp_path / "report" / "results.json").read_text())["tables"]
                  if table["id"] == "table3")
    assert [column["id"] for column in table3["columns"]] == [
        "segmentation:lumiere", "segmentation:ucsf-pdgm", "segmentation:nsclc", "registration:lumiere",
        "vista3d:nsclc"]
    task = next(row for section in table3["sections"] for row in section["rows"] if row["identity"]["metric"] == "task")
    registration, segmentation = task["cells"]["registration:lumiere"], task["cells"]["segmentation:lumiere"]
    assert registration["value"] == 1.0 and registration["reference_n"] == 2  # the native-scan control
    assert segmentation["value"] == 1.0 and segmentation["reference_n"] == 1  # Track A on the atlas package
    assert "warning" not in capsys.readouterr().err  # the control is a row of its own, not pooled
    table1 = next(table for table in json.loads((tmp_path / "report" / "results.json").read_text())["tables"]
                  if table["id"] == "table1")
    assert sorted(row["identity"]["track"] for section in table1["sections"] for row in section["rows"]
                  if not row.get("summary_row")) == ["A", "A (native scans)"]
    assert task["cells"]["vista3d:nsclc"]["value"] is None


def test_operators_outside_track_b_or_unknown_are_refused(tmp_path, capsys):
    base = ["bench", "run", "--module", "lumiere", "--agent", "oracle", "--out", str(tmp_path / "x")]
    assert main([*base, "--operators", "registration"]) == 2
    assert "add --track B" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--track", "B", "--operators", "teleport"])
    assert "neither an operation (segmentation, registration, vista3d)" in capsys.readouterr().err

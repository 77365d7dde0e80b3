"""Golden tests of the Table 4 scorers with hand-computed masks and polygons."""

from __future__ import annotations

import json

import nibabel as nib
import numpy as np
import pytest
import shapely

from MedOpenClawLib.bench.cases import GroundTruth
from MedOpenClawLib.bench.modules import get
from MedOpenClawLib.bench.scoring import aggregate, score_case
from MedOpenClawLib.bench.scoring.geometry import (
    VoxelMask,
    area_covers,
    evidence_area,
    interior_reference_point,
    key_slice_in_range,
)
from MedOpenClawLib.bench.scoring.process import multiset_f1, process_metrics


def _mask(shape, box):
    data = np.zeros(shape, dtype=bool)
    data[box] = True
    return data


# --- geometry ---


def test_ras_ranges_identity_half_voxel_rule():
    mask = VoxelMask(_mask((10, 10, 10), np.s_[2:5, 3:4, 6:9]), np.eye(4))
    ranges = mask.ras_ranges()
    # voxel centres R in {2,3,4}, A == 3, S in {6,7,8}; half a voxel = 0.5 mm
    assert ranges == {"R": (1.5, 4.5), "A": (2.5, 3.5), "S": (5.5, 8.5)}
    assert key_slice_in_range(8.49, ranges, "axial")
    assert key_slice_in_range(5.5, ranges, "axial")  # boundary of the boundary voxel
    assert not key_slice_in_range(8.51, ranges, "axial")
    assert not key_slice_in_range(9.0, ranges, "axial")  # off by one slice
    assert key_slice_in_range(3.0, ranges, "coronal")
    assert not key_slice_in_range(4.0, ranges, "coronal")
    assert not key_slice_in_range(None, ranges, "sagittal")
    assert not key_slice_in_range(float("nan"), ranges, "sagittal")


@pytest.mark.parametrize("order", ["C", "F"])  # NSCLC's masks are Fortran-ordered views
def test_mask_box_is_the_bounding_box_scipy_finds(order):
    from scipy import ndimage

    rng = np.random.default_rng(3)
    for points in (1, 5, 40):
        data = np.zeros((9, 11, 7), dtype=bool, order=order)
        data[rng.integers(0, 9, points), rng.integers(0, 11, points), rng.integers(0, 7, points)] = True
        data[(0, 8)[points % 2], 10, 0] = points > 1  # the array's faces too
        assert VoxelMask(data, np.eye(4))._box() == ndimage.find_objects(data.view(np.uint8))[0]
    assert VoxelMask(np.zeros((4, 5, 6), dtype=bool, order=order), np.eye(4))._box() is None


def test_lps_stored_anisotropic_volume():
    # voxel axes run towards L and P (as DICOM stores them) with 0.8 x 0.8 x 3 mm spacing
    affine = np.array([[-0.8, 0, 0, 100.0], [0, -0.8, 0, 50.0], [0, 0, 3.0, -20.0], [0, 0, 0, 1]])
    mask = VoxelMask(_mask((20, 20, 10), np.s_[5:8, 10:12, 4:6]), affine)
    ranges = mask.ras_ranges()
    # R centres 100 - 0.8*{5,6,7} = 96, 95.2, 94.4; A 50 - 0.8*{10,11} = 42, 41.2; S -20 + 3*{4,5} = -8, -5
    assert ranges["R"] == pytest.approx((94.0, 96.4))
    assert ranges["A"] == pytest.approx((40.8, 42.4))
    assert ranges["S"] == pytest.approx((-9.5, -3.5))
    assert mask.contains([95.2, 41.2, -5.0])
    assert mask.contains([95.55, 41.55, -6.4])  # still within voxel (6, 11, 5)
    assert not mask.contains([93.9, 41.2, -5.0])  # voxel 8 along i: outside the mask
    assert not mask.contains([95.2, 41.2, -3.4])  # slice 6 along k
    assert not mask.contains([500, 0, 0])  # outside the array
    assert not key_slice_in_range(-3.0, ranges, "axial")  # one 3 mm slice beyond the last lesion slice


def test_oblique_affine_round_trip_and_reference_point():
    angle = np.deg2rad(30)
    rotation = np.array([[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]])
    affine = np.eye(4)
    affine[:3, :3] = rotation @ np.diag([1.0, 1.0, 2.0])
    affine[:3, 3] = [-10, 5, 0]
    mask = VoxelMask(_mask((12, 12, 12), np.s_[3:9, 4:8, 2:10]), affine)
    point, slices = mask.interior_reference()
    assert mask.contains(point)
    ranges = mask.ras_ranges()
    for view in ("axial", "sagittal", "coronal"):
        assert key_slice_in_range(slices[view], ranges, view)
    centre = (affine @ np.array([3, 4, 2, 1.0]))[:3]
    assert mask.contains(centre)
    assert not mask.contains((affine @ np.array([2, 4, 2, 1.0]))[:3])


def _covers(x, y, polygon, holes=()):
    return area_covers(evidence_area([{"polygon": polygon, "holes": list(holes)}]), x, y)


def test_polygon_edges_concave_holes_and_a_repaired_figure_eight():
    square = [[0, 0], [10, 0], [10, 10], [0, 10]]
    assert _covers(5, 5, square)
    assert _covers(10, 5, square)  # on the edge
    assert not _covers(10.01, 5, square)
    concave = [[0, 0], [10, 0], [10, 10], [5, 3], [0, 10]]
    assert not _covers(5, 8, concave)
    assert _covers(2, 2, concave)
    assert not _covers(1, 1, [[0, 0], [1, 1]])
    hole = [[4, 4], [6, 4], [6, 6], [4, 6]]
    assert not _covers(5, 5, square, [hole])  # inside the hole: a miss
    assert _covers(4, 5, square, [hole]) and _covers(2, 2, square, [hole])  # on the hole's edge, in the ring
    bow_tie = [[0, 0], [10, 10], [10, 0], [0, 10]]  # self-intersecting: two triangles meeting at (5, 5)
    assert _covers(1, 5, bow_tie) and _covers(9, 5, bow_tie) and not _covers(5, 1, bow_tie)


def test_exclusions_are_subtracted_and_their_edges_belong_to_the_tumour_minus_them():
    tumour = {"polygon": [[0, 0], [100, 0], [100, 100], [0, 100]]}
    exclusion = {"polygon": [[40, 40], [60, 40], [60, 60], [40, 60]]}
    area = evidence_area([tumour], [exclusion])
    assert area_covers(area, 10, 10) and not area_covers(area, 50, 50)
    assert area_covers(area, 40, 50)  # the closure of tumour minus exclusion: its edge is a hit
    assert evidence_area([exclusion], [tumour]).is_empty


def test_the_reference_point_keeps_clear_of_exclusions_after_rounding():
    """Integer ASAP coordinates where the horizontal-margin scan's point, rounded to 0.01 px, fell onto the
    exclusion (found by a random search against that scan)."""
    tumour = {"polygon": [[1020, 1000], [1018, 1011], [1014, 1016], [1002, 1025], [993, 1022], [981, 1013],
                          [982, 1005], [979, 995], [984, 985], [992, 978], [1002, 981], [1011, 985], [1021, 991]]}
    exclusion = {"polygon": [[1002, 994], [994, 1000], [986, 994], [994, 987]]}
    area = evidence_area([tumour], [exclusion])
    x, y = interior_reference_point(area)
    assert area_covers(area, x, y) and not area_covers(evidence_area([exclusion]), x, y)
    assert area.boundary.distance(shapely.Point(x, y)) >= 0.5
    with pytest.raises(ValueError, match="nothing of the region remains"):
        interior_reference_point(evidence_area([exclusion], [tumour]))
    with pytest.raises(ValueError, match="clear of its edges"):
        interior_reference_point(evidence_area([{"polygon": [[0, 0], [100, 0], [100, 0.6], [0, 0.6]]}]))


# --- radiology rules ---


@pytest.fixture
def lesion_truth(tmp_path):
    """A 3x2x2 lesion in an LPS-stored, anisotropic NIfTI; used for UCSF and NSCLC rules."""
    affine = np.array([[-0.8, 0, 0, 100.0], [0, -0.8, 0, 50.0], [0, 0, 3.0, -20.0], [0, 0, 0, 1]])
    data = _mask((20, 20, 10), np.s_[5:8, 10:12, 4:6]).astype(np.uint8)
    nib.save(nib.Nifti1Image(data, affine), tmp_path / "mask.nii.gz")
    mask = VoxelMask(data > 0, affine)
    localization = {
        "source_volume_name": "CT",
        "mask": "mask.nii.gz",
        "ras_ranges": {axis: list(bounds) for axis, bounds in mask.ras_ranges().items()},
        "reference_ras": [95.2, 41.2, -5.0],
        "reference_key_slices": {"axial": -5.0, "sagittal": 95.2, "coronal": 41.2},
    }

    def build(module, answers):
        return GroundTruth(module, "case", answers, localization=localization, hidden_dir=tmp_path)

    return build


GOOD_EVIDENCE = {
    "key_slice_axial_mm": -8.0,
    "key_slice_sagittal_mm": 94.4,
    "key_slice_coronal_mm": 42.0,
    "ras": [95.2, 41.2, -5.0],
}


def test_ucsf_task_strict_loc(lesion_truth):
    truth = lesion_truth("ucsf-pdgm", {"answer": "A"})
    full = score_case(get("ucsf-pdgm"), truth, {"answer": "A", "evidence": GOOD_EVIDENCE})
    assert (full.task, full.strict, full.loc) == (1.0, 1.0, 1.0)
    # RAS outside the mask does not affect Strict for UCSF (scored separately as Loc)
    outside = dict(GOOD_EVIDENCE, ras=[0.0, 0.0, 0.0])
    score = score_case(get("ucsf-pdgm"), truth, {"answer": "A", "evidence": outside})
    assert (score.task, score.strict, score.loc) == (1.0, 1.0, 0.0)
    # one key slice one 3 mm slice off -> Strict 0
    off = dict(GOOD_EVIDENCE, key_slice_axial_mm=-2.0)
    score = score_case(get("ucsf-pdgm"), truth, {"answer": "A", "evidence": off})
    assert (score.task, score.strict, score.loc) == (1.0, 0.0, 1.0)
    assert score.gates["key_slice_axial"] is False
    wrong = score_case(get("ucsf-pdgm"), truth, {"answer": "B", "evidence": GOOD_EVIDENCE})
    assert (wrong.task, wrong.strict, wrong.loc) == (0.0, 0.0, 1.0)
    empty = score_case(get("ucsf-pdgm"), truth, {"answer": None, "evidence": {}})
    assert (empty.task, empty.strict, empty.loc) == (0.0, 0.0, 0.0)


def test_ucsf_no_tumor_case_has_no_evidence_gate():
    truth = GroundTruth("ucsf-pdgm", "c", {"answer": "C"}, localization=None)
    score = score_case(get("ucsf-pdgm"), truth, {"answer": "C", "evidence": {}})
    assert (score.task, score.strict, score.loc) == (1.0, 1.0, None)


def test_nsclc_partial_score_only_with_full_evidence(lesion_truth):
    truth = lesion_truth("nsclc", {"q1": "A", "q2": "B", "q3": "A", "q4": "A", "q5": "B"})
    answers = {"q1": "A", "q2": "B", "q3": "C", "q4": "A", "q5": None}
    score = score_case(get("nsclc"), truth, {"answers": answers, "evidence": GOOD_EVIDENCE})
    assert score.task == pytest.approx(3 / 5) and score.strict == pytest.approx(3 / 5) and score.loc == 1.0
    no_ras = dict(GOOD_EVIDENCE, ras=[95.2, 41.2, -11.0])  # key slices fine, point one slice below the lesion
    score = score_case(get("nsclc"), truth, {"answers": answers, "evidence": no_ras})
    assert (score.strict, score.loc) == (0.0, 0.0)
    bad_slice = dict(GOOD_EVIDENCE, key_slice_sagittal_mm=93.9)
    score = score_case(get("nsclc"), truth, {"answers": answers, "evidence": bad_slice})
    assert score.task == pytest.approx(0.6) and score.strict == 0.0 and score.loc == 1.0


def test_lumiere_fields_gate_skips_unscorable():
    fields = {
        "non_measurable_lesion": True,
        "t2_progression": False,
        "current_target_lesion": True,
        "new_target_lesion": False,
        "current_non_target_lesion": None,
        "new_non_target_lesion": False,
    }
    truth = GroundTruth("lumiere", "p", {"answer": "A"}, evidence_fields=fields)
    predicted = {key: (False if value is None else value) for key, value in fields.items()}
    score = score_case(get("lumiere"), truth, {"answer": "A", "evidence": predicted})
    assert (score.task, score.strict, score.loc) == (1.0, 1.0, None)
    assert score.details["fields"]["current_non_target_lesion"] is None
    predicted["t2_progression"] = True
    score = score_case(get("lumiere"), truth, {"answer": "A", "evidence": predicted})
    assert (score.task, score.strict) == (1.0, 0.0)
    predicted["t2_progression"] = None  # a missing field is wrong, not skipped
    assert score_case(get("lumiere"), truth, {"answer": "A", "evidence": predicted}).strict == 0.0


# --- pathology rules ---

BRACS_REGIONS = [
    {"label": "DCIS", "kind": "roi", "polygon": [[100, 100], [200, 100], [200, 200], [100, 200]]},
    {"label": "UDH", "kind": "roi", "polygon": [[300, 100], [400, 100], [400, 200], [300, 200]]},
]


def test_bracs_roi_of_matching_class():
    truth = GroundTruth("bracs", "b", {"answer": "DCIS"}, regions=BRACS_REGIONS)
    hit = score_case(get("bracs"), truth, {"answer": "DCIS", "localizations": [[50, 50], [150, 150]]})
    assert (hit.task, hit.strict, hit.loc) == (1.0, 1.0, 1.0)
    wrong_roi = score_case(get("bracs"), truth, {"answer": "DCIS", "localizations": [[350, 150]]})
    assert (wrong_roi.task, wrong_roi.strict, wrong_roi.loc) == (1.0, 0.0, 0.0)
    wrong_label = score_case(get("bracs"), truth, {"answer": "ADH", "localizations": [[150, 150]]})
    assert (wrong_label.task, wrong_label.strict, wrong_label.loc) == (0.0, 0.0, 1.0)
    nothing = score_case(get("bracs"), truth, {"answer": "DCIS", "localizations": []})
    assert (nothing.strict, nothing.loc) == (0.0, 0.0)


def test_bracs_click_in_an_roi_hole_is_a_miss():
    ring = {"label": "DCIS", "kind": "roi", "polygon": [[0, 0], [300, 0], [300, 300], [0, 300]],
            "holes": [[[100, 100], [200, 100], [200, 200], [100, 200]]]}
    truth = GroundTruth("bracs", "h", {"answer": "DCIS"}, regions=[ring])
    in_hole = score_case(get("bracs"), truth, {"answer": "DCIS", "localizations": [[150, 150]]})
    assert (in_hole.task, in_hole.strict, in_hole.loc) == (1.0, 0.0, 0.0)
    in_ring = score_case(get("bracs"), truth, {"answer": "DCIS", "localizations": [[150, 150], [50, 50]]})
    assert (in_ring.strict, in_ring.loc) == (1.0, 1.0)


def test_bracs_normal_requires_empty_localizations():
    truth = GroundTruth("bracs", "n", {"answer": "N"}, regions=[])
    assert score_case(get("bracs"), truth, {"answer": "N", "localizations": []}).strict == 1.0
    score = score_case(get("bracs"), truth, {"answer": "N", "localizations": [[1, 1]]})
    assert (score.task, score.strict, score.loc) == (1.0, 0.0, None)


CAMELYON_REGIONS = [
    {"label": "tumor", "kind": "tumor", "polygon": [[0, 0], [1000, 0], [1000, 1000], [0, 1000]]},
    {"label": "exclusion", "kind": "exclusion", "polygon": [[400, 400], [600, 400], [600, 600], [400, 600]]},
]


def test_camelyon_hit_avoids_exclusions():
    truth = GroundTruth(
        "camelyon17",
        "c",
        {"tumor_presence": "tumor_present", "largest_metastasis": "macro"},
        regions=CAMELYON_REGIONS,
    )
    answer = {"tumor_presence": "tumor_present", "largest_metastasis": "macro"}
    hit = score_case(get("camelyon17"), truth, dict(answer, localizations=[[100, 100]]))
    assert (hit.task, hit.strict, hit.loc) == (1.0, 1.0, 1.0)
    excluded = score_case(get("camelyon17"), truth, dict(answer, localizations=[[500, 500]]))
    assert (excluded.strict, excluded.loc) == (0.0, 0.0)
    category = score_case(get("camelyon17"), truth, dict(answer, largest_metastasis="micro", localizations=[[100, 100]])
    )
    assert (category.task, category.strict, category.loc) == (0.0, 0.0, 1.0)


def test_camelyon_negative_slide_requires_empty():
    truth = GroundTruth("camelyon17", "n", {"tumor_presence": "no_tumor", "largest_metastasis": "negative"})
    answer = {"tumor_presence": "no_tumor", "largest_metastasis": "negative"}
    assert score_case(get("camelyon17"), truth, dict(answer, localizations=[])).strict == 1.0
    score = score_case(get("camelyon17"), truth, dict(answer, localizations=[[5, 5]]))
    assert (score.task, score.strict, score.loc) == (1.0, 0.0, None)


# --- aggregation and process metrics ---


def test_aggregate_excludes_invalid_and_counts_them():
    truth = GroundTruth("bracs", "n", {"answer": "N"})
    scores = [
        score_case(get("bracs"), truth, {"answer": "N", "localizations": []}),
        score_case(get("bracs"), truth, {"answer": "PB", "localizations": []}),
        score_case(get("bracs"), truth, None, invalid="viewer crashed"),
    ]
    summary = aggregate(scores, get("bracs"))
    assert summary["n"] == 2 and summary["invalid"] == 1
    assert summary["task"] == 0.5 and summary["strict"] == 0.5 and summary["loc"] is None
    lumiere = aggregate(
        [score_case(get("lumiere"), GroundTruth("lumiere", "l", {"answer": "A"}), {"answer": "A"})], get("lumiere")
    )
    assert lumiere["loc"] is None and lumiere["task"] == 1.0
    with pytest.raises(ValueError):
        aggregate(scores + lumiere_scores(), get("bracs"))


def lumiere_scores():
    return [score_case(get("lumiere"), GroundTruth("lumiere", "l", {"answer": "A"}), {"answer": "B"})]


def test_score_case_rejects_module_mismatch():
    with pytest.raises(ValueError):
        score_case(get("bracs"), GroundTruth("lumiere", "l", {"answer": "A"}), {})


def _action(name, status="ok", code=None, arguments=None, images=0):
    return {
        "kind": "action",
        "actor": "agent",
        "action": name,
        "arguments": arguments or {},
        "status": status,
        "error": {"code": code, "message": ""} if code else None,
        "result": {"images": [{"view": "axial"}] * images},
    }


def test_process_metrics_hand_computed():
    records = [
        {"kind": "session_start", "actor": "system", "payload": {}},
        {
            "kind": "action",
            "actor": "system",
            "action": "open_case",
            "status": "ok",
            "result": {"images": []},
        },
        _action("observe", images=3),
        _action("zoom", status="error", code="invalid_argument", arguments={"factor": -1}),
        _action("zoom", status="error", code="invalid_argument", arguments={"factor": -1}),
        _action("zoom", arguments={"factor": 2}, images=1),
        _action("viewer_point_to_wsi_coordinate"),
        {
            "kind": "model_output",
            "actor": "agent",
            "payload": {"usage": {"input_tokens": 100, "output_tokens": 7}},
        },
        {
            "kind": "model_output",
            "actor": "agent",
            "payload": {"usage": {"prompt_tokens": 50, "completion_tokens": 3},
                        "deviations": ["tool_call_as_text"]},
        },
    ]
    metrics = process_metrics(get("bracs"), records, answered=True,
                              reference=["zoom", "pan", "viewer_point_to_wsi_coordinate"])
    assert metrics["calls"] == 5
    # agent multiset {observe, zoom x3, v2w} vs {zoom, pan, v2w}: overlap 2, P = 2/5, R = 2/3
    assert metrics["planning_f1"] == pytest.approx(round(2 * 0.4 * (2 / 3) / (0.4 + 2 / 3), 4))
    assert metrics["tool_success"] == 0.6 and metrics["argument_validity"] == 0.6
    assert metrics["turn_efficiency"] == 0.6
    assert metrics["error_recovery"] == 0.5  # first failure repeated identically, second one recovered
    assert metrics["execution"] == pytest.approx(0.4 * 0.6 + 0.2 * 0.6 + 0.25 * 0.6 + 0.15 * 0.5)
    assert metrics["stages"] == {"navigate": True, "localize": True, "answer": True}
    assert metrics["progress_rate"] == 1.0
    assert metrics["images"] == 4 and metrics["input_tokens"] == 150 and metrics["output_tokens"] == 10
    assert metrics["budget_exhausted"] is False and metrics["invalid"] is None
    assert metrics["protocol_deviations"] == 1  # counted from the model_output receipts
    exhausted = process_metrics(get("bracs"), [_action("zoom", "error", "budget_exhausted")], answered=False)
    assert exhausted["budget_exhausted"] and exhausted["progress_rate"] == 0.0
    fault = process_metrics(get("bracs"), [{"kind": "environment_fault", "payload": {"reason": "QuPath died"}}], False
    )
    assert fault["invalid"] == "QuPath died" and fault["calls"] == 0 and fault["execution"] is None


def test_multiset_f1_edges():
    assert multiset_f1([], ["a"]) == 0.0
    assert multiset_f1(["a", "a"], ["a", "a"]) == 1.0
    assert json.dumps(multiset_f1(["a"], ["a", "b"])) == "0.6667"


def test_nsclc_question_outside_the_label_set_is_not_scored(lesion_truth):
    """Tis T stage / "Not Collected" grade: the case stays, that question leaves the denominator."""
    truth = lesion_truth("nsclc", {"q1": "A", "q2": None, "q3": "A", "q4": "A", "q5": "B"})
    answers = {"q1": "A", "q2": "C", "q3": "A", "q4": "B", "q5": "B"}
    score = score_case(get("nsclc"), truth, {"answers": answers, "evidence": GOOD_EVIDENCE})
    assert score.task == 0.75 and score.details["questions"]["q2"] is None
    summary = aggregate([score, score_case(get("nsclc"), truth, {"answers": {}, "evidence": GOOD_EVIDENCE})],
                        get("nsclc"))
    assert summary["q2"] is None and summary["q1"] == 0.5 and summary["q4"] == 0.0


def test_positive_slide_without_reference_evidence_has_strict_equal_to_task_and_counts():
    """A BRACS slide without a GeoJSON export is no evidence-scored case (Table 4): Strict = Task, no Loc."""
    unavailable = GroundTruth("bracs", "u", {"answer": "DCIS"}, {"answer": "DCIS", "evidence": "unavailable"})
    score = score_case(get("bracs"), unavailable, {"answer": "DCIS", "localizations": [[1, 1]]})
    assert score.task == 1.0 and score.strict == 1.0 and score.loc is None
    assert score.gates["evidence"] == "unavailable"
    scored = score_case(get("bracs"), GroundTruth("bracs", "b", {"answer": "DCIS"}, regions=BRACS_REGIONS),
                        {"answer": "DCIS", "localizations": []})
    summary = aggregate([score, scored], get("bracs"))
    assert summary["task"] == 1.0 and summary["strict"] == 0.5 and summary["loc"] == 0.0 and summary["loc_n"] == 1

"""Every trace-audit rule on constructed traces, each positive and negative: evidence provenance (key slices,
RAS points, WSI points, measurements = F2), F1, F3, F4, the G.5 milestones, stability across repeats, bad input,
and the ``trace audit`` command."""

from __future__ import annotations

import json

import pytest
from trace_builder import TraceBuilder, audit_trace, geometry, image

from MedOpenClawLib.cli import main
from MedOpenClawLib.trace_audit import stability
from MedOpenClawLib.trace_audit.milestones import final_view
from MedOpenClawLib.trace_audit.provenance import reported_measurements
from MedOpenClawLib.trace_audit.timeline import Timeline

ANSWER = "ANSWER: B"
LUMIERE = ("OLD_CT1", "OLD_FLAIR", "CURRENT_CT1", "CURRENT_FLAIR")
REGISTRATION_TOOLS = ("register_volumes", "apply_transform", "resample_volume", "fusion", "observe")
SEGMENTATION_TOOLS = ("segment_region", "quantify", "image_coords_to_ras", "observe")


def evidence_answer(axial=10.0, sagittal=0.0, coronal=0.0, ras=(0.0, 0.0, 10.0), extra="") -> str:
    return (f"{extra}\nEVIDENCE:\nKEY_SLICE_AXIAL_MM: {axial:.2f}\nKEY_SLICE_SAGITTAL_MM: {sagittal:.2f}\n"
            f"KEY_SLICE_CORONAL_MM: {coronal:.2f}\nRAS: [{ras[0]:.2f}, {ras[1]:.2f}, {ras[2]:.2f}]\n{ANSWER}")


def codes(report) -> list[str]:
    return [finding.rule for finding in report.findings]


def field(report, name):
    return next(item for item in report.provenance if item.field == name)


# ------------------------------------------------------------------------------------------- provenance
def test_evidence_shown_within_half_a_slice_and_converted_is_grounded_with_its_records():
    trace = TraceBuilder(tools=("observe", "image_coords_to_ras")).prompt([image("sagittal", 0.0)])
    shown = trace.call("jump", {"ras": [0, 0, 10]}, {}, [image("axial", 10.9), image("coronal", 0.0)])
    converted = trace.call("image_coords_to_ras", {"view": "axial", "point_1000": [500, 500]},
                           {"ras": [0.4, -0.3, 10.9]})
    report = audit_trace(trace.answer(evidence_answer(ras=(0.0, 0.0, 10.5))).records)
    assert codes(report) == []
    assert field(report, "key_slice_axial_mm").records == [shown]  # 0.9 mm from a 2 mm slice: within half
    assert field(report, "key_slice_sagittal_mm").records == [2]  # the baseline image of the prompt
    ras = field(report, "ras")
    assert (ras.grounded, ras.basis, ras.records) == (True, "conversion", [converted])


def test_slices_and_points_never_shown_are_ungrounded():
    trace = TraceBuilder(tools=("observe",)).prompt([image("axial", 0.0), image("sagittal", 0.0)])
    trace.call("observe", {}, {}, [image("coronal", 0.0)])
    report = audit_trace(trace.answer(evidence_answer(axial=3.2, ras=(5.0, 7.0, 40.0))).records)
    assert codes(report) == ["EV.ungrounded", "EV.ungrounded"]
    assert [item.field for item in report.provenance if not item.grounded] == ["key_slice_axial_mm", "ras"]
    assert all(finding.records == (report.findings[0].records[0],) for finding in report.findings)
    assert "offsets shown: 0" in field(report, "key_slice_axial_mm").note


def test_a_ras_point_on_a_shown_slice_is_grounded_and_one_off_the_image_is_not():
    trace = TraceBuilder(tools=("observe",)).prompt()
    seq = trace.call("set_slice_offset", {"view": "axial", "offset": 10}, {}, [image("axial", 10.0)])
    on_slice = audit_trace(trace.answer(evidence_answer(ras=(30.0, -40.0, 10.4))).records)
    assert field(on_slice, "ras").basis == "displayed" and field(on_slice, "ras").records == [seq]

    outside = TraceBuilder(tools=("observe",)).prompt()
    outside.call("set_slice_offset", {"view": "axial", "offset": 10}, {}, [image("axial", 10.0)])
    report = audit_trace(outside.answer(evidence_answer(ras=(130.0, 0.0, 10.0))).records)  # beyond the 200 mm FOV
    assert not field(report, "ras").grounded


def test_montage_tiles_ground_their_offsets_only():
    trace = TraceBuilder(tools=("scroll",)).prompt()
    seq = trace.call("scroll", {"view": "axial", "direction": "up", "output": "cine"},
                     {"offsets_mm": [4.0, 8.0, 12.0]}, [{"view": "montage", "width": 512, "height": 512}])
    report = audit_trace(trace.answer(evidence_answer(axial=8.0, ras=(0, 0, 8))).records)
    assert field(report, "key_slice_axial_mm").records == [seq]
    miss = audit_trace(TraceBuilder(tools=("scroll",)).prompt().answer(evidence_answer(axial=6.0)).records)
    assert not field(miss, "key_slice_axial_mm").grounded


def test_track_c_montages_of_the_prompt_ground_their_tiles_but_set_up_renders_not_sent_do_not():
    trace = TraceBuilder(track="C", tools=())
    trace._action("system", "select_volume", {"volume_name": "T1c"}, {"data": {}, "images": [image("axial", 30.0)]},
                  artifacts=[{"kind": "image", "path": "s.png", "sha256": "setup"}])
    montage = trace._action("system", "scroll", {"view": "axial", "direction": "up", "output": "cine"},
                            {"data": {"offsets_mm": [10.0, 20.0]}, "images": [{"view": "montage"}]},
                            artifacts=[{"kind": "image", "path": "m.png", "sha256": "base0"}])["seq"]
    trace.prompt()  # the prompt lists the montage's checksum ("base0"), not the set-up render's
    trace.records[-1]["payload"]["images"] = [{"sha256": "base0"}]
    report = audit_trace(trace.answer(evidence_answer(axial=20.0)).records)
    assert field(report, "key_slice_axial_mm").records == [montage]
    unsent = audit_trace(trace.records[:-2] + TraceBuilder().answer(evidence_answer(axial=30.0)).records[-2:])
    assert not field(unsent, "key_slice_axial_mm").grounded


def test_failed_calls_and_images_of_other_views_ground_nothing():
    trace = TraceBuilder(tools=("observe",)).prompt()
    trace.call("observe", {}, {}, [image("axial", 10.0)], ok=False)
    trace.call("observe", {}, {}, [image("coronal", 10.0)])
    report = audit_trace(trace.answer(evidence_answer(axial=10.0)).records)
    assert not field(report, "key_slice_axial_mm").grounded


def wsi_trace(field_box, downsample, conversion=None) -> TraceBuilder:
    trace = TraceBuilder(module="bracs", track="A", tools=("zoom", "viewer_point_to_wsi_coordinate"))
    trace.state = {"viewer": {"view": {"field": [0, 0, 16000, 12000], "downsample": 16.0, "max_downsample": 16.0}}}
    trace.call("focus_qupath")
    trace.state = {"viewer": {"view": {"field": field_box, "downsample": downsample, "max_downsample": 16.0}}}
    trace.call("zoom", {"amount": 4})
    if conversion:
        trace.call("viewer_point_to_wsi_coordinate", {"x": 500, "y": 500},
                   {"x": conversion[0], "y": conversion[1], "downsample": downsample})
    return trace


def bracs_answer(x, y) -> str:
    return json.dumps({"selected_option": "C", "wsi_label": "UDH", "localizations": [{"x": x, "y": y}]})


def test_wsi_points_from_a_conversion_or_a_zoomed_field_are_grounded():
    converted = audit_trace(wsi_trace([8000, 4000, 12000, 7000], 4.0, (9001.24, 5000.05))
                              .answer(bracs_answer(9001.2, 5000.1)).records)
    assert codes(converted) == [] and field(converted, "localizations[0]").basis == "conversion"
    viewed = audit_trace(wsi_trace([8000, 4000, 12000, 7000], 4.0).answer(bracs_answer(11000, 6000)).records)
    assert field(viewed, "localizations[0]").basis == "viewed_field" and codes(viewed) == []


def test_wsi_points_seen_only_in_the_overview_or_never_are_ungrounded():
    overview = audit_trace(wsi_trace([8000, 4000, 12000, 7000], 4.0).answer(bracs_answer(2000, 1000)).records)
    assert codes(overview) == ["EV.ungrounded"]
    assert "overview" in field(overview, "localizations[0]").note
    off = audit_trace(wsi_trace([8000, 4000, 12000, 7000], 4.0, (9000, 5000)).answer(bracs_answer(12100, 5000))
                        .records)
    assert not field(off, "localizations[0]").grounded  # beside the zoomed field, far from the conversion
    assert "overview" in field(off, "localizations[0]").note
    never = audit_trace(wsi_trace([8000, 4000, 12000, 7000], 4.0).answer(bracs_answer(17000, 5000)).records)
    assert "no viewed field" in field(never, "localizations[0]").note


def test_reported_measurements_are_read_with_units_and_positions_are_not():
    text = ("The enhancing lesion measures 23 x 18 mm (SPD 414 mm²); volume 4.2 mL, longest diameter 2.5 cm.\n"
            "It is seen on the axial slice at 12.5 mm, along the midline 3 mm from the falx.\n"
            "KEY_SLICE_AXIAL_MM: 12.50\nRAS: [1, 2, 3]\nSize change +20%.\n"
            "Voxel size 1 mm; slice thickness 2.5 mm, in-plane spacing 0.9 mm.")
    found = [(kind, round(value, 3)) for _, kind, value in reported_measurements(text)]
    assert found == [("length", 23.0), ("length", 18.0), ("area", 414.0), ("volume", 4.2), ("length", 25.0)]


def test_a_measurement_backed_by_measure_line_or_quantify_is_grounded_else_f2():
    trace = TraceBuilder("lumiere", tools=("measure_line", "quantify")).prompt()
    line = trace.call("measure_line", {"start_ras": [0, 0, 0], "end_ras": [22.6, 0, 0]}, {"length_mm": 22.6})
    volume = trace.call("quantify", {"segmentation_name": "s"}, {"statistics": {"volume_ml": 4.18}})
    report = audit_trace(trace.answer("Lesion diameter 23 mm, volume 4.2 mL and 9 mL before.\n" + ANSWER).records)
    assert [(item.grounded, item.records) for item in report.provenance] == [(True, [line]), (True, [volume]),
                                                                            (False, [])]
    assert codes(report) == ["F2.unmeasured"] and report.findings[0].severity == "high"


def test_a_screen_box_converted_to_millimetres_is_pseudo_quantification():
    trace = TraceBuilder(module="lumiere", tools=("draw_roi", "image_coords_to_ras")).prompt()
    trace.call("draw_roi", {"view": "axial", "shape": "box", "bbox_1000": [400, 400, 520, 500]},
               {"center_ras": [1, 2, 3], "size_mm": [24.0, 20.0, 2.0]})
    report = audit_trace(trace.answer("Target lesion 24 x 20 mm, SPD up 30%.\nANSWER: A").records)
    assert codes(report) == ["F2.unmeasured", "F2.unmeasured"]


# ---------------------------------------------------------------------------------------------------- F1
def test_f1_registration_within_one_timepoint_but_not_across_timepoints():
    drift = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS, volumes=LUMIERE).prompt()
    drift.register("OLD_CT1", "OLD_FLAIR")
    report = audit_trace(drift.answer(ANSWER).records)
    assert "F1.within_timepoint" in codes(report)
    sound = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS, volumes=LUMIERE).prompt()
    sound.register("OLD_CT1", "CURRENT_CT1")
    assert not [code for code in codes(audit_trace(sound.answer(ANSWER).records)) if code.startswith("F1")]


def test_a_trace_from_before_the_volume_convention_is_read_under_the_current_names():
    """Traces recorded with register_volumes(fixed_volume=, moving_volume=) audit as they did: the timeline reads
    every record's arguments under the current names (arguments.RENAMED)."""
    trace = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS, volumes=LUMIERE).prompt()
    trace.register("OLD_CT1", "OLD_FLAIR")
    records = trace.answer(ANSWER).records
    for record in records:
        if record.get("action") == "register_volumes":
            record["arguments"] = {"fixed_volume": "OLD_CT1", "moving_volume": "OLD_FLAIR"}
            record["result"]["data"].pop("inputs")  # only the arguments name the volumes
    assert "F1.within_timepoint" in codes(audit_trace(records))


def test_f1_registration_in_a_single_study_module():
    trace = TraceBuilder("ucsf-pdgm", tools=("register_volumes",)).prompt()
    trace.register("T1c", "FLAIR")
    assert codes(audit_trace(trace.answer(ANSWER).records)) == ["F1.single_study"]


# ---------------------------------------------------------------------------------------------------- F3
def registered(trace: TraceBuilder) -> tuple[str, str]:
    transform = trace.register("OLD_CT1", "CURRENT_CT1")
    return transform, trace.resample("CURRENT_CT1", transform, "OLD_CT1")


def test_the_registered_workflow_carries_no_finding_and_completes_its_milestones():
    trace = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS, volumes=LUMIERE).prompt()
    _, output = registered(trace)
    trace.fusion("OLD_CT1", output)
    report = audit_trace(trace.answer(ANSWER).records)
    assert codes(report) == []
    assert report.milestones["complete"] and list(report.milestones["reached"]) == ["BF", "BR", "fusion"]


def test_applying_the_transform_instead_of_resampling_also_completes_the_workflow():
    trace = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS, volumes=LUMIERE).prompt()
    transform = trace.register("CURRENT_CT1", "OLD_CT1")  # the baseline moved onto the follow-up
    trace.apply("OLD_CT1", transform)
    trace.fusion("CURRENT_CT1", "OLD_CT1")
    report = audit_trace(trace.answer(ANSWER).records)
    assert codes(report) == [] and report.milestones["complete"]


def test_f3_fusion_of_an_unregistered_follow_up():
    trace = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS, volumes=LUMIERE).prompt()
    seq = trace.fusion("OLD_CT1", "CURRENT_CT1")
    report = audit_trace(trace.answer(ANSWER).records)
    assert codes(report) == ["F3.fusion_unregistered"] and report.findings[0].records == (seq,)


def test_fusion_without_registration_on_offer_is_not_f3():
    trace = TraceBuilder("lumiere", track="A", tools=("fusion", "observe"), volumes=LUMIERE).prompt()
    trace.fusion("OLD_CT1", "CURRENT_CT1")
    assert codes(audit_trace(trace.answer(ANSWER).records)) == []


def test_f3_fusion_of_the_unregistered_volume_beside_the_registered_one():
    trace = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS, volumes=LUMIERE).prompt()
    registered(trace)
    trace.fusion("OLD_CT1", "CURRENT_FLAIR")  # the FLAIR follow-up was never moved
    report = audit_trace(trace.answer(ANSWER).records)
    assert sorted(codes(report)) == ["F3.fusion_unregistered", "G5.registration_incomplete"]


def test_f3_transform_bound_to_a_volume_of_the_other_study():
    trace = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS, volumes=LUMIERE).prompt()
    transform = trace.register("OLD_CT1", "CURRENT_CT1")
    seq = trace.apply("OLD_FLAIR", transform)
    report = audit_trace(trace.answer(ANSWER).records)
    assert "F3.transform_misbound" in codes(report)
    assert next(f for f in report.findings if f.rule == "F3.transform_misbound").records == (seq,)


def test_f3_misbinding_the_artifact_graph_reports():
    trace = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS, volumes=LUMIERE).prompt()
    transform = trace.register("OLD_CT1", "CURRENT_CT1")
    trace.apply("CURRENT_FLAIR", transform, problem={"code": "transform_misbound", "message": "not its frame"})
    assert "F3.transform_misbound" in codes(audit_trace(trace.answer(ANSWER).records))


def test_f3_a_transform_substituted_for_the_volume_s_own():
    trace = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS, volumes=LUMIERE).prompt()
    ct1 = trace.register("OLD_CT1", "CURRENT_CT1", "ct1")
    trace.register("OLD_FLAIR", "CURRENT_FLAIR", "flair")
    trace.apply("CURRENT_CT1", ct1)  # sound: its own transform
    assert "F3.transform_substituted" not in codes(audit_trace(trace.answer(ANSWER).records))
    swapped = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS, volumes=LUMIERE).prompt()
    swapped.register("OLD_CT1", "CURRENT_CT1", "ct1")
    flair = swapped.register("OLD_FLAIR", "CURRENT_FLAIR", "flair")
    swapped.apply("CURRENT_CT1", flair)
    assert "F3.transform_substituted" in codes(audit_trace(swapped.answer(ANSWER).records))


def test_f3_evidence_recorded_on_a_volume_no_view_shows():
    trace = TraceBuilder(tools=("record_point",)).prompt()
    trace.call("record_point", {"ras": [0, 0, 0], "volume_name": "FLAIR"}, {"volume_name": "FLAIR"})
    trace.call("record_point", {"ras": [0, 0, 0], "volume_name": "T1c"}, {"volume_name": "T1c"})
    assert codes(audit_trace(trace.answer(ANSWER).records)) == ["F3.evidence_volume"]


# ---------------------------------------------------------------------------------------------------- F4
def test_f4_a_discarded_segmentation_never_compared_with_its_disjoint_successor():
    trace = TraceBuilder(tools=SEGMENTATION_TOOLS).prompt()
    trace.call("image_coords_to_ras", {"view": "axial", "point_1000": [1, 1]}, {"ras": [0, 0, 0]})
    first = trace.segment("early", [0, 0, 0], [10, 10, 10])
    last = trace.segment("late", [30, 30, 30], [40, 40, 40])
    trace.call("quantify", {"segmentation_name": "late"}, {"statistics": {"volume_ml": 1.0}})
    report = audit_trace(trace.answer(ANSWER).records)
    assert codes(report) == ["F4.discarded_unchecked"] and report.findings[0].records == (first, last)


def test_refining_the_same_region_or_checking_the_discarded_one_is_not_f4():
    refined = TraceBuilder(tools=SEGMENTATION_TOOLS).prompt()
    refined.segment("early", [0, 0, 0], [10, 10, 10])
    refined.segment("late", [2, 2, 2], [12, 12, 12])
    assert "F4.discarded_unchecked" not in codes(audit_trace(refined.answer(ANSWER).records))
    checked = TraceBuilder(tools=SEGMENTATION_TOOLS).prompt()
    checked.segment("early", [0, 0, 0], [10, 10, 10])
    checked.segment("late", [30, 30, 30], [40, 40, 40])
    checked.call("quantify", {"segmentation_name": "early"}, {"statistics": {"volume_ml": 1.0}})
    assert "F4.discarded_unchecked" not in codes(audit_trace(checked.answer(ANSWER).records))


# ------------------------------------------------------------------------------------------ G5 milestones
def test_g5_a_begun_workflow_left_incomplete_and_one_never_begun():
    partial = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS, volumes=LUMIERE).prompt()
    registered(partial)  # BF and BR, never verified with fusion
    report = audit_trace(partial.answer(ANSWER).records)
    assert codes(report) == ["G5.registration_incomplete"] and report.findings[0].severity == "low"
    assert report.milestones["reached"]["fusion"] is None and report.milestones["begun"]
    idle = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS, volumes=LUMIERE).prompt()
    idle.call("observe")
    idle_report = audit_trace(idle.answer(ANSWER).records)
    assert codes(idle_report) == [] and not idle_report.milestones["begun"]


def test_milestones_need_their_order_and_are_not_judged_without_the_operations():
    order = TraceBuilder(tools=SEGMENTATION_TOOLS).prompt()
    order.segment("lesion", [0, 0, 0], [10, 10, 10])
    order.call("image_coords_to_ras", {"view": "axial", "point_1000": [1, 1]}, {"ras": [0, 0, 0]})
    order.call("quantify", {"segmentation_name": "lesion"}, {"statistics": {"volume_ml": 1.0}})
    report = audit_trace(order.answer(ANSWER).records)
    assert report.milestones["reached"]["segment"] is None and codes(report) == ["G5.segmentation_incomplete"]
    track_a = TraceBuilder(track="A", tools=("observe",)).prompt()
    assert audit_trace(track_a.answer(ANSWER).records).milestones is None


def test_stability_across_repeats():
    runs = []
    for repeat, complete in ((1, True), (2, False)):
        trace = TraceBuilder(tools=SEGMENTATION_TOOLS).prompt()
        trace.call("image_coords_to_ras", {"view": "axial", "point_1000": [1, 1]}, {"ras": [0, 0, 0]})
        trace.segment("lesion", [0, 0, 0], [10, 10, 10] if complete else [10, 10, 20], volume=1.0 + repeat)
        if complete:
            trace.call("quantify", {"segmentation_name": "lesion"}, {"statistics": {"volume_ml": 2.0}})
        runs.append({"repeat": repeat, **audit_trace(trace.answer(ANSWER).records).to_json()})
    result = stability(runs)
    assert result["complete_share"] == 0.5 and result["runs"] == 2 and result["runs_without_mask"] == 0
    assert result["mask_bbox_iou"] == 0.5 and result["final_view_agreement"] == 1.0
    assert result["mask_volume_cv"] == pytest.approx(0.2)
    assert [item["complete"] for item in result["milestones"]] == [True, False]


# ------------------------------------------------------------------------------------- reading the trace
def test_the_timeline_keeps_one_entry_per_distinct_image_and_only_the_state_rules_read():
    """A long trace is read in memory that grows with what can be cited, not with the records."""
    trace = TraceBuilder(tools=("observe", "set_slice_offset")).prompt([image("axial", 0.0)])
    again = [trace.call("observe", {}, {}, [{**image("axial", 10.0), "path": f"i{n}.png"}]) for n in range(3)]
    other = trace.call("set_slice_offset", {"view": "axial", "offset": 12}, {"offset_mm": 12.0},
                       [{**image("axial", 12.0), "path": "last.png"}])
    calls = []
    timeline = Timeline(iter(trace.answer(evidence_answer(axial=10.0)).records), lambda _, call: calls.append(call))
    assert [(shown.offset_mm, shown.seqs.kept) for shown in timeline.shown] == [(0.0, [2]), (10.0, again),
                                                                                  (12.0, [other])]
    assert field(audit_trace(trace.records), "key_slice_axial_mm").records == again
    assert final_view(timeline)["images"] == {"axial": "last.png"}
    assert not hasattr(timeline, "calls")  # each call goes to the checkers as it is read, and is not kept
    call = calls[-1]
    with pytest.raises(LookupError, match="STATE_READ_BY"):
        timeline.state_after(call)  # set_slice_offset's state is read by no rule, so not kept
    with pytest.raises(KeyError, match="DATA_KEYS"):
        call.data.get("offset_mm")  # nor its result keys no rule reads


# --------------------------------------------------------------------------------------------- robustness
@pytest.mark.parametrize("records", [
    [], [None, 3, "x"], [{"kind": "action"}], [{"kind": "action", "result": [], "state": 7, "arguments": "x"}],
    [{"kind": "episode_end",
      "payload": {"final_text": "KEY_SLICE_AXIAL_MM: 1e999\nRAS: [nan, 1, 2]\nlength 1e999 mm"}}],
    [{"kind": "action", "actor": "agent", "action": "jump", "status": "ok",
      "result": {"images": [{"view": "axial", "slice_offset_mm": "3", "geometry": {"xy_to_ras": [[1]]}}]}}],
])
def test_malformed_traces_are_audited_without_raising(records):
    report = audit_trace(records, "ucsf-pdgm")
    json.dumps(report.to_json(), allow_nan=False)


JUNK = (None, 1, -1.5, float("nan"), float("inf"), "x", "", [], {}, [1, 2], [[1]], {"a": 1}, True, "img-1",
        [None, None, None], [1e308, 1e308, 1e308], [[0] * 4] * 4)


def _paths(value, prefix=()):
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield from _paths(item, (*prefix, key))


def _replace(records, place, value) -> None:
    holder = records
    try:
        for key in place[:-1]:
            holder = holder[key]
        holder[place[-1]] = value
    except (KeyError, IndexError, TypeError):
        pass  # an earlier replacement removed the path


def test_randomly_corrupted_traces_are_audited_without_raising():
    """Any value of any record replaced by junk (wrong types, NaN, singular matrices): a report, never a raise."""
    import copy
    import random

    trace = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS + SEGMENTATION_TOOLS, volumes=LUMIERE)
    trace.prompt([image("axial", 0.0)])
    transform, output = registered(trace)
    trace.fusion("OLD_CT1", output)
    trace.segment("a", [0, 0, 0], [1, 1, 1])
    trace.segment("b", [5, 5, 5], [6, 6, 6])
    trace.call("quantify", {"segmentation_name": "b"}, {"statistics": {"volume_ml": 1.0}})
    base = trace.answer("diameter 12 mm\n" + evidence_answer()).records
    places = list(_paths(base))[1:]
    rng = random.Random(0)
    for _ in range(150):
        records = copy.deepcopy(base)
        for place in rng.sample(places, 3):
            _replace(records, place, copy.deepcopy(rng.choice(JUNK)))
        for module in ("lumiere", "ucsf-pdgm", "bracs"):
            json.dumps(audit_trace(records, module).to_json(), allow_nan=False)


def test_deeply_nested_arguments_are_read_without_recursion():
    """A crafted call whose arguments nest 5000 lists deep, between two segmentations: the F4 check reads its
    names without running out of stack (a trace file of 500 levels made the audit exit with a RecursionError)."""
    deep: object = "a"
    for _ in range(5000):
        deep = [deep]
    trace = TraceBuilder(tools=SEGMENTATION_TOOLS).prompt()
    first = trace.segment("a", [0, 0, 0], [1, 1, 1])
    trace.call("quantify", {"segmentation_name": deep})
    last = trace.segment("b", [5, 5, 5], [6, 6, 6])
    trace.call("quantify", {"segmentation_name": deep})  # names a after b: a was compared
    assert "F4.discarded_unchecked" not in codes(audit_trace(trace.answer(ANSWER).records))
    trace.records[-3]["arguments"] = {"segmentation_name": [[["b"]]]}  # names only b: a was set aside unchecked
    assert [finding.records for finding in audit_trace(trace.records).findings
            if finding.code == "F4"] == [(first, last)]


def test_a_singular_geometry_grounds_nothing():
    trace = TraceBuilder(tools=("observe",)).prompt()
    broken = image("axial", 10.0)
    broken["geometry"]["xy_to_ras"] = [[0, 0, 0, 0]] * 4
    trace.call("observe", {}, {}, [broken])
    assert not field(audit_trace(trace.answer(evidence_answer(ras=(0, 0, 10))).records), "ras").grounded


# --------------------------------------------------------------------------------------------------- CLI
def write_trace(path, records) -> None:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")


def test_trace_audit_command_prints_text_and_json_and_fails_on_severity(tmp_path, capsys):
    trace = TraceBuilder("lumiere", tools=REGISTRATION_TOOLS, volumes=LUMIERE).prompt()
    trace.fusion("OLD_CT1", "CURRENT_CT1")
    path = tmp_path / "trace.jsonl"
    write_trace(path, trace.answer(ANSWER).records)
    assert main(["trace", "audit", str(path)]) == 0
    text = capsys.readouterr().out
    assert "[high] F3 F3.fusion_unregistered (records 3)" in text and "module: lumiere" in text
    assert main(["trace", "audit", str(path), "--json", "--fail-on", "high"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["findings"][0]["code"] == "F3" and document["module"] == "lumiere"
    assert main(["trace", "audit", str(path), "--module", "ucsf-pdgm", "--fail-on", "low"]) == 0


@pytest.mark.parametrize(("line", "reason"), [("{not json", "Expecting property name"),
                                              ("[" * 100_000 + "]" * 100_000, "line 2 is nested too deeply")])
def test_trace_audit_command_refuses_an_unreadable_trace(tmp_path, capsys, line, reason):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "session_start"}\n' + line + "\n", encoding="utf-8")
    assert main(["trace", "audit", str(bad)]) == 2
    assert f"{bad} is not a readable trace: " in (err := capsys.readouterr().err) and reason in err


def test_geometry_fixture_matches_the_viewer_mapping():
    """The fixture's geometry maps its centre pixel to the plane origin, as the viewer's records do."""
    from MedOpenClawLib.trace_audit.provenance import project

    column, row, distance = project(geometry("coronal", 5.0), [0.0, 5.0, 0.0])
    assert (round(column, 6), round(row, 6), round(distance, 6)) == (49.5, 49.5, 0.0)

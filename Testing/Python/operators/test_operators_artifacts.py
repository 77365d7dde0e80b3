"""The artifact graph makes unregistered fusion and transform misbinding (paper failure F3) visible."""

from __future__ import annotations

from MedOpenClawLib.operators.artifacts import ArtifactGraph, TransformArtifact, VolumeArtifact


def volume(node_id, name, grid="g1", frame=None, **links):
    return VolumeArtifact(node_id, name, grid, frame, **links)


REGISTRATION = TransformArtifact("T1", "followup_to_baseline", fixed="V1", moving="V2", transform_type="rigid")


def codes(warnings):
    return [warning["code"] for warning in warnings]


def test_fusing_an_unregistered_follow_up_is_flagged():
    volumes = [volume("V1", "baseline", frame="A"), volume("V2", "followup", frame="B")]
    graph = ArtifactGraph(volumes, [REGISTRATION], [])
    warnings = graph.fusion_warnings("V1", "V2")
    assert codes(warnings) == ["unregistered"] and "register_volumes" in warnings[0]["message"]
    assert graph.fusion_warnings("V1", None) == []


def test_applied_or_resampled_registration_aligns_the_follow_up():
    applied = ArtifactGraph(
        [volume("V1", "baseline", frame="A"), volume("V2", "followup", frame="B", parent_transform="T1")],
        [REGISTRATION], [],
    )
    assert applied.fusion_warnings("V1", "V2") == []
    resampled = ArtifactGraph(
        [volume("V1", "baseline", frame="A"), volume("V2", "followup", frame="B"),
         volume("V3", "followup resampled", "g1", derived_from="V2", via_transform="T1", reference="V1")],
        [REGISTRATION], [],
    )
    assert resampled.fusion_warnings("V1", "V3") == []
    assert codes(resampled.fusion_warnings("V1", "V2")) == ["unregistered"]
    state = resampled.to_json()
    assert {item["id"]: item["space"] for item in state["volumes"]}["V3"] == "frame:A"
    assert state["transforms"][0]["moving"] == "V2"


def test_transform_bound_to_the_wrong_volume_is_flagged():
    volumes = [volume("V1", "baseline_T1", frame="A"), volume("V2", "followup_T1", frame="B"),
               volume("V4", "followup_FLAIR", "g2", frame="B"), volume("V5", "baseline_FLAIR", "g3", frame="A",
                                                                    parent_transform="T1")]
    graph = ArtifactGraph(volumes, [REGISTRATION], [])
    warnings = graph.fusion_warnings("V1", "V5")
    assert codes(warnings) == ["transform_misbound"] and "estimated for moving volume followup_T1" in warnings[0][
        "message"]
    same_session = ArtifactGraph([*volumes[:3], volume("V4b", "followup_FLAIR", "g2", frame="B",
                                                       parent_transform="T1")], [REGISTRATION], [])
    assert same_session.fusion_warnings("V1", "V4b") == []  # FLAIR of the moving session: a legitimate binding


def test_volumes_without_frames_are_aligned_only_on_an_identical_grid():
    graph = ArtifactGraph([volume("V1", "T1c", "g1"), volume("V2", "FLAIR", "g1"), volume("V3", "PET", "g9")], [], [])
    assert graph.fusion_warnings("V1", "V2") == []
    assert codes(graph.fusion_warnings("V1", "V3")) == ["alignment_unverified"]


def test_hand_made_transform_is_unverified():
    graph = ArtifactGraph([volume("V1", "a", frame="A"), volume("V2", "b", frame="A", parent_transform="T9")],
                          [TransformArtifact("T9", "manual")], [])
    assert codes(graph.fusion_warnings("V1", "V2")) == ["unverified_transform"]

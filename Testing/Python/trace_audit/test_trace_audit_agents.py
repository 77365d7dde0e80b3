"""Agents that commit each failure mode on a real headless Track B session (scripted offline plans, and models
behind the fake model server) get exactly that finding; a sound workflow gets none. (The oracle's benchmark
episodes carry none: test_agents_offline.py, on every module.)"""

from __future__ import annotations

import nibabel as nib
import numpy as np
import pytest
from agents_fakes import FakeModelServer, Scripted, openai_reply
from operator_phantoms import phantom_volume, rotation_matrix
from trace_builder import audit_trace

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.bench.agents.base import AgentContext, ScriptedAgent
from MedOpenClawLib.bench.agents.model import ModelAgent
from MedOpenClawLib.bench.episode import EpisodeConfig, EpisodePrompt, run_episode
from MedOpenClawLib.core.audit import AuditTrace, read_trace
from MedOpenClawLib.providers import ProviderConfig, RetryPolicy, make_provider
from MedOpenClawLib.worker.environment import LocalEnvironment

MOTION = np.eye(4)
MOTION[:3, :3] = rotation_matrix((5.0, 0.0, -4.0))
MOTION[:3, 3] = (3.0, -2.0, 2.0)
RANO = "NON_MEASURABLE_LESION: NO\nT2_PROGRESSION: NO\nANSWER: B"
TRANSFORM = "CURRENT_CT1 to OLD_CT1"


def write(path, volume) -> None:
    nib.save(nib.Nifti1Image(volume.array.transpose(2, 1, 0).astype(np.float32), volume.ijk_to_ras), str(path))


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """Two studies of one patient (OLD, CURRENT: moved), two sequences each on one grid per study, and a
    volume with two separate bright lesions for the segmentation plans."""
    root = tmp_path_factory.mktemp("case")
    old, current = phantom_volume((32, 32, 32), (2, 2, 2)), phantom_volume((32, 32, 30), (2, 2, 2), MOTION)
    for name, volume in (("OLD_CT1", old), ("OLD_FLAIR", old), ("CURRENT_CT1", current),
                         ("CURRENT_FLAIR", current)):
        write(root / f"{name}.nii.gz", volume)
    lesions = old.__class__(np.full((24, 32, 32), 40.0, np.float32), np.diag([2.0, 2.0, 2.0, 1.0]))
    lesions.array[8:14, 6:12, 6:12] = 200.0
    lesions.array[8:14, 20:26, 20:26] = 200.0
    lesions.array += np.random.default_rng(0).normal(0, 2, lesions.array.shape).astype(np.float32)
    write(root / "LESIONS.nii.gz", lesions)
    return root


class Plan(ScriptedAgent):
    """A fixed plan: rounds of calls (a round may be a function of the previous round's results), then ``answer``."""

    name = "scripted"

    def __init__(self, rounds, answer: str):
        self.rounds, self.answer = rounds, answer

    def plan(self, context: AgentContext):
        results = None
        for round_calls in self.rounds:
            results = yield (round_calls(results) if callable(round_calls) else round_calls)
            assert all(result["ok"] for result in results), results
        return self.answer


def episode(case, tmp_path, module: str, agent, max_rounds: int = 12):
    trace_path = tmp_path / "trace.jsonl"
    registry = build_slicer_registry([case], track="B", trace=AuditTrace(
        trace_path, header={"module": module, "track": "B"}, save_images=True))
    assert registry.call("open_case", {"dicom_dir": str(case), "size": 64}, actor="system").ok
    env = LocalEnvironment(registry)
    agent.reset(AgentContext(module=module, case=None, tools=env.tools(), max_rounds=max_rounds))
    run_episode(agent, env, EpisodePrompt("system", "task"), EpisodeConfig(max_rounds=max_rounds))
    return audit_trace(read_trace(trace_path), module)


def rules(report) -> list[str]:
    return sorted(finding.rule for finding in report.findings)


REGISTERED = [
    [("register_volumes", {"fixed_volume_ref": "OLD_CT1", "moving_volume_ref": "CURRENT_CT1"})],
    [("resample_volume", {"volume_name": "CURRENT_CT1", "transform_name": TRANSFORM,
                          "reference_volume_ref": "OLD_CT1"})],
    [("fusion", {"background_volume_ref": "OLD_CT1", "foreground_volume_ref": "CURRENT_CT1 resampled", "size": 64})],
]


def test_the_sound_registration_workflow_has_no_finding(case, tmp_path):
    report = episode(case, tmp_path, "lumiere", Plan(REGISTERED, RANO))
    assert rules(report) == [] and report.milestones["complete"]


def test_registration_within_one_timepoint_is_f1_only(case, tmp_path):
    drift = [[("register_volumes", {"fixed_volume_ref": "OLD_CT1", "moving_volume_ref": "OLD_FLAIR",
                                    "transform_name": "intra"})], *REGISTERED]
    assert rules(episode(case, tmp_path, "lumiere", Plan(drift, RANO))) == ["F1.within_timepoint"]


def test_fusing_the_unregistered_follow_up_is_f3_only(case, tmp_path):
    fused = [[("fusion", {"background_volume_ref": "OLD_CT1", "foreground_volume_ref": "CURRENT_FLAIR",
                          "size": 64})]]
    assert rules(episode(case, tmp_path, "lumiere", Plan(fused, RANO))) == ["F3.fusion_unregistered"]


def test_binding_the_follow_up_transform_to_a_baseline_volume_is_f3_only(case, tmp_path):
    misbound = [REGISTERED[0], [("apply_transform", {"volume_name": "OLD_FLAIR", "transform_name": TRANSFORM})],
                [("fusion", {"background_volume_ref": "CURRENT_CT1", "foreground_volume_ref": "OLD_FLAIR",
                             "size": 64})]]
    report = episode(case, tmp_path, "lumiere", Plan(misbound, RANO))
    assert {finding.code for finding in report.findings} == {"F3"}
    assert "F3.transform_misbound" in rules(report)


def test_stopping_after_resampling_is_g5_only(case, tmp_path):
    report = episode(case, tmp_path, "lumiere", Plan(REGISTERED[:2], RANO))
    assert rules(report) == ["G5.registration_incomplete"] and report.milestones["reached"]["fusion"] is None


def test_discarding_a_segmentation_for_a_disjoint_unchecked_one_is_f4_only(case, tmp_path):
    plan = Plan([
        [("select_volume", {"volume_name": "LESIONS", "size": 64})],
        [("jump", {"ras": [18.0, 18.0, 22.0], "size": 64})],
        [("segment_region", {"volume_name": "LESIONS", "seeds_ras": [[18.0, 18.0, 22.0]], "segment_name": "a",
                             "size": 64})],
        [("segment_region", {"volume_name": "LESIONS", "seeds_ras": [[46.0, 46.0, 22.0]], "segment_name": "b",
                             "size": 64})],
        [("quantify", {"segmentation_name": "LESIONS b"})],
    ], "ANSWER: A")
    report = episode(case, tmp_path, "ucsf-pdgm", plan)
    assert rules(report) == ["F4.discarded_unchecked"] and report.milestones["complete"]


def model_episode(case, tmp_path, module: str, script: list[Scripted]):
    with FakeModelServer(script) as server:
        provider = make_provider(ProviderConfig(kind="openai", model="m", base_url=server.url, api_key="k",
                                                timeout_s=30.0, retry=RetryPolicy(max_retries=0)))
        return episode(case, tmp_path, module, ModelAgent(provider))


def test_a_model_converting_a_screen_box_to_millimetres_is_f2_only(case, tmp_path):
    script = [
        Scripted(openai_reply(calls=[("select_volume", '{"volume_name": "CURRENT_CT1", "size": 64}')])),
        Scripted(openai_reply(calls=[("draw_roi", '{"view": "axial", "shape": "box", '
                                                  '"bbox_1000": [400, 400, 560, 520]}')])),
        Scripted(openai_reply(text="Target lesion measures 24 x 19 mm, SPD up 30%.\n" + RANO)),
    ]
    report = model_episode(case, tmp_path, "lumiere", script)
    assert rules(report) == ["F2.unmeasured", "F2.unmeasured"]


def test_a_model_citing_slices_and_a_point_it_never_saw_is_flagged_ungrounded(case, tmp_path):
    script = [
        Scripted(openai_reply(calls=[("select_volume", '{"volume_name": "OLD_CT1", "size": 64}')])),
        Scripted(openai_reply(text="KEY_SLICE_AXIAL_MM: 17.00\nKEY_SLICE_SAGITTAL_MM: 13.00\n"
                                   "KEY_SLICE_CORONAL_MM: -9.00\nRAS: [13.00, -9.00, 17.00]\nANSWER: A")),
    ]
    report = model_episode(case, tmp_path, "ucsf-pdgm", script)
    assert rules(report) == ["EV.ungrounded"] * 4
    assert all(not item.grounded for item in report.provenance)

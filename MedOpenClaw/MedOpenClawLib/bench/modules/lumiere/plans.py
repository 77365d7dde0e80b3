"""The offline agents' plans on LUMIERE: the oracle (reads the hidden truth, gathers its evidence through the
tools), the heuristic baseline (tools and pixels only) and the random floor.
"""

from __future__ import annotations

from ...agents.base import AgentContext, Plan
from ...agents.heuristic import (
    FIXED_WINDOW,
    MEASURABLE_MM,
    HeuristicAgent,
    ToolFailed,
)
from ...agents.heuristic import RATIONALE as HEURISTIC_RATIONALE
from ...agents.oracle import SMALL, OracleAgent
from ...agents.pixels import Blob, bright_blobs, bright_threshold
from ...agents.random_agent import RATIONALE as RANDOM_RATIONALE
from ...agents.random_agent import RandomAgent
from ...kit.answers import Evidence
from .answer import compose
from .labels import LUMIERE_EVIDENCE_FIELDS, RANO_OPTIONS


def oracle(agent: OracleAgent, context: AgentContext) -> Plan:
    current = [volume.name for volume in context.case.volumes if volume.role == "CURRENT"]
    if current:
        yield [("select_volume", {"volume_name": current[0], "size": SMALL})]
    else:
        yield [("observe", {"size": SMALL})]
    return agent.answer(context, Evidence.of_truth(context.ground_truth))  # it cites the truth's fields only


def heuristic(agent: HeuristicAgent, context: AgentContext) -> Plan:
    names = {(v.role, v.name.split("_", 1)[-1]): v.name for v in context.case.volumes}
    try:
        old_ct1, old_offsets, mm_per_px, _ = yield from agent.sweep(names[("OLD", "CT1")], FIXED_WINDOW)
        new_ct1, _, _, _ = yield from agent.sweep(names[("CURRENT", "CT1")], FIXED_WINDOW)
        old_flair, _, _, _ = yield from agent.sweep(names[("OLD", "FLAIR")], FIXED_WINDOW)
        new_flair, _, _, _ = yield from agent.sweep(names[("CURRENT", "FLAIR")], FIXED_WINDOW)
    except (ToolFailed, KeyError) as failure:
        return compose("B", {}, f"{HEURISTIC_RATIONALE} {failure}")
    threshold = bright_threshold(old_ct1)
    old, new = bright_blobs(old_ct1, threshold), bright_blobs(new_ct1, threshold)
    flair_threshold = bright_threshold(old_flair)
    old_edema = sum(blob.voxels for blob in bright_blobs(old_flair, flair_threshold))
    new_edema = sum(blob.voxels for blob in bright_blobs(new_flair, flair_threshold))
    letter, fields = rano(old, new, old_edema, new_edema, mm_per_px)
    return compose(letter, fields, HEURISTIC_RATIONALE + " Enhancing and FLAIR volumes compared on fixed windows.")


def random(agent: RandomAgent, context: AgentContext) -> Plan:
    rng = agent.rng(context)
    yield [("get_viewer_state", {"include_fusion": False})]
    fields = {name: rng.random() < 0.5 for name in LUMIERE_EVIDENCE_FIELDS}
    return compose(rng.choice(RANO_OPTIONS)[0], fields, RANDOM_RATIONALE)


def rano(old: list[Blob], new: list[Blob], old_edema: int, new_edema: int,
         mm_per_px: float) -> tuple[str, dict[str, bool]]:
    """RANO-like response from enhancing-blob volumes (volume ratio 1.4 ~ SPD +25 %, 0.35 ~ SPD -50 %)."""
    old_volume, new_volume = sum(b.voxels for b in old), sum(b.voxels for b in new)
    measurable = [b for b in new if b.diameter_mm(mm_per_px) >= MEASURABLE_MM]
    small = [b for b in new if b.diameter_mm(mm_per_px) < MEASURABLE_MM]
    appeared = len(new) > len(old)
    t2 = old_edema > 0 and new_edema >= 1.25 * old_edema
    if appeared or t2 or (old_volume and new_volume >= 1.4 * old_volume):
        letter = "A"
    elif not new:
        letter = "D"
    elif old_volume and new_volume <= 0.35 * old_volume:
        letter = "C"
    else:
        letter = "B"
    fields = {
        "non_measurable_lesion": bool(small),
        "t2_progression": t2,
        "current_target_lesion": bool(measurable),
        "new_target_lesion": appeared and bool(measurable),
        "current_non_target_lesion": bool(small),
        "new_non_target_lesion": appeared and bool(small),
    }
    return letter, fields

"""The offline agents' plans on UCSF-PDGM: the oracle (reads the hidden truth, gathers its evidence through the
tools), the heuristic baseline (tools and pixels only) and the random floor.
"""

from __future__ import annotations

from ...agents.base import AgentContext, Plan, last_tool_images
from ...agents.heuristic import (
    ENHANCING_CONTRAST,
    STRONG_ENHANCEMENT,
    VIEW_CENTRE_1000,
    HeuristicAgent,
    ToolFailed,
    data_of,
)
from ...agents.heuristic import RATIONALE as HEURISTIC_RATIONALE
from ...agents.oracle import OracleAgent
from ...agents.pixels import bright_blobs, decode, disk_contrast
from ...agents.random_agent import RATIONALE as RANDOM_RATIONALE
from ...agents.random_agent import RandomAgent
from .answer import compose
from .labels import UCSF_OPTIONS


def oracle(agent: OracleAgent, context: AgentContext) -> Plan:
    """The answers with the key slices and RAS point read at the reference voxel."""
    return agent.localized_plan(context)


def heuristic(agent: HeuristicAgent, context: AgentContext) -> Plan:
    flair, t1c = agent.series(context, "FLAIR"), agent.series(context, "T1c")
    try:
        stack, offsets, mm_per_px, _ = yield from agent.sweep(flair)
        blobs = bright_blobs(stack)
        if not blobs:
            return compose("C", None, None, HEURISTIC_RATIONALE + " No abnormal FLAIR signal.")
        blob = blobs[0]
        key_slices, ras = yield from agent.localize(flair, blob, offsets)
        results = yield [("select_volume", {"volume_name": t1c, "view": "axial", "size": 64}),
                         ("jump", {"ras": ras, "view": "axial", "size": 256})]
        data_of(results[1], "jump")
        (t1c_view,) = last_tool_images(agent.conversation)[1]
    except ToolFailed as failure:
        return compose("C", None, None, f"{HEURISTIC_RATIONALE} {failure}")
    enhancement = disk_contrast(decode(t1c_view), *VIEW_CENTRE_1000, (blob.area / 3.14) ** 0.5)
    if enhancement >= STRONG_ENHANCEMENT:
        letter, reason = "A", "FLAIR-bright mass with strong enhancement"
    elif enhancement >= ENHANCING_CONTRAST:
        letter, reason = "F", "FLAIR-bright mass with mild enhancement"
    else:
        letter, reason = "B", "FLAIR-bright non-enhancing mass"
    return compose(letter, key_slices, ras, f"{HEURISTIC_RATIONALE} {reason} ({enhancement:.0f} levels).")


def random(agent: RandomAgent, context: AgentContext) -> Plan:
    rng = agent.rng(context)
    key_slices, ras = yield from agent.volume_evidence(rng)
    return compose(rng.choice(UCSF_OPTIONS)[0], key_slices, ras, RANDOM_RATIONALE)

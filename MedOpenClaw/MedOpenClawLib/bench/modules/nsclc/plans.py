"""The offline agents' plans on NSCLC: the oracle (reads the hidden truth, gathers its evidence through the
tools), the heuristic baseline (tools and pixels only) and the random floor.
"""

from __future__ import annotations

from ...agents.base import AgentContext, Plan
from ...agents.heuristic import RATIONALE as HEURISTIC_RATIONALE
from ...agents.heuristic import (
    HeuristicAgent,
    ToolFailed,
)
from ...agents.oracle import OracleAgent
from ...agents.pixels import Blob, bright_blobs
from ...agents.random_agent import RATIONALE as RANDOM_RATIONALE
from ...agents.random_agent import RandomAgent
from .answer import compose
from .labels import NSCLC_QUESTIONS


def oracle(agent: OracleAgent, context: AgentContext) -> Plan:
    """The answers with the key slices and RAS point read at the reference voxel."""
    return agent.localized_plan(context)


def heuristic(agent: HeuristicAgent, context: AgentContext) -> Plan:
    pet, ct = agent.series(context, "pet"), context.case.brief.get("source_volume_name")
    no_tumour = {qid: options[-1][0] for qid, _, options in NSCLC_QUESTIONS}
    try:
        stack, offsets, mm_per_px, summary = yield from agent.sweep(pet)
        blobs = bright_blobs(stack)
        if not blobs:
            return compose(no_tumour, None, None, HEURISTIC_RATIONALE + " No PET-avid lesion.")
        blob = blobs[0]
        key_slices, ras = yield from agent.localize(pet, blob, offsets, evidence=ct)
    except ToolFailed as failure:
        return compose(no_tumour, None, None, f"{HEURISTIC_RATIONALE} {failure}")
    bounds = summary["ras_bounds"]
    letters = {
        "q1": lung_lobe(ras, bounds),
        "q2": t_stage(blob.diameter_mm(mm_per_px)),
        "q3": n_stage(blobs[1:], blob),
        "q4": "A",  # adenocarcinoma: the most frequent NSCLC histology (a prior, not an image finding)
        "q5": "B",  # G2: the most frequent grade (a prior)
    }
    return compose(letters, key_slices, ras, f"{HEURISTIC_RATIONALE} PET maximum localised on CT.")


def random(agent: RandomAgent, context: AgentContext) -> Plan:
    rng = agent.rng(context)
    key_slices, ras = yield from agent.volume_evidence(rng)
    letters = {qid: rng.choice(options)[0] for qid, _, options in NSCLC_QUESTIONS}
    return compose(letters, key_slices, ras, RANDOM_RATIONALE)


# ------------------------------------------------------------------------------------------------ rules
def lung_lobe(ras: list[float], bounds: list[list[float]]) -> str:
    """Lobe from the lesion's position in the thorax: side by R, upper/middle/lower by height and depth."""
    (r0, r1), (a0, a1), (s0, s1) = bounds
    height = (ras[2] - s0) / max(s1 - s0, 1e-6)
    depth = (ras[1] - a0) / max(a1 - a0, 1e-6)
    right = ras[0] > (r0 + r1) / 2
    if height > 0.6:
        return "A" if right else "D"
    if height > 0.4 and depth > 0.55:
        return "B" if right else "F"
    return "C" if right else "E"


def t_stage(diameter_mm: float) -> str:
    """AJCC 8th edition T category by greatest diameter (<= 3, <= 5, <= 7, > 7 cm)."""
    for limit, letter in ((30.0, "A"), (50.0, "B"), (70.0, "C")):
        if diameter_mm <= limit:
            return letter
    return "D"


def n_stage(others: list[Blob], primary: Blob) -> str:
    """N0 without other avid foci; N2 when one lies near the midline (mediastinum), else N1 (hilar)."""
    if not others:
        return "A"
    return "C" if any(abs(blob.x_px - 128.0) < 20.0 for blob in others) else "B"

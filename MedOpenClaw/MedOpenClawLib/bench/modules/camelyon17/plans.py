"""The offline agents' plans on CAMELYON17: the oracle (reads the hidden truth, gathers its evidence through the
tools), the heuristic baseline (tools and pixels only) and the random floor.
"""

from __future__ import annotations

from ...agents.base import AgentContext, Plan
from ...agents.heuristic import RATIONALE as HEURISTIC_RATIONALE
from ...agents.heuristic import (
    TUMOUR_CONTRAST,
    HeuristicAgent,
)
from ...agents.oracle import OracleAgent
from ...agents.random_agent import RATIONALE as RANDOM_RATIONALE
from ...agents.random_agent import RandomAgent
from ...kit.answers import Evidence
from .answer import compose


def oracle(agent: OracleAgent, context: AgentContext) -> Plan:
    answers = context.ground_truth.answers
    regions = [region for region in context.ground_truth.regions if region.get("kind") == "tumor"]
    points = yield from agent.slide_evidence(answers["tumor_presence"] == "tumor_present", regions)
    return agent.answer(context, Evidence(points=points))


def heuristic(agent: HeuristicAgent, context: AgentContext) -> Plan:
    points, contrast, area_px, focused = yield from agent.densest_focus()
    if contrast < TUMOUR_CONTRAST or not points:
        return compose("no_tumor", "negative", [], f"{HEURISTIC_RATIONALE} no dense focus ({contrast:.0f}).")
    mpp = (focused["data"]["state"].get("image") or {}).get("mpp") or 1.0
    return compose("tumor_present", metastasis_size((area_px / 3.14) ** 0.5 * 2 * mpp), points,
                           f"{HEURISTIC_RATIONALE} dense focus ({contrast:.0f}).")


def random(agent: RandomAgent, context: AgentContext) -> Plan:
    rng = agent.rng(context)
    points = yield from agent.slide_point(rng)
    presence = rng.choice(("no_tumor", "tumor_present"))
    metastasis = "negative" if presence == "no_tumor" else rng.choice(("itc", "micro", "macro"))
    return compose(presence, metastasis, points if presence == "tumor_present" else [], RANDOM_RATIONALE)


def metastasis_size(diameter_um: float) -> str:
    """CAMELYON size classes: ITC < 0.2 mm, micrometastasis 0.2-2 mm, macrometastasis > 2 mm."""
    return "itc" if diameter_um < 200 else "micro" if diameter_um <= 2000 else "macro"

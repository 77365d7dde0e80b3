"""The offline agents' plans on BRACS: the oracle (reads the hidden truth, gathers its evidence through the
tools), the heuristic baseline (tools and pixels only) and the random floor.
"""

from __future__ import annotations

from ...agents.base import AgentContext, Plan
from ...agents.heuristic import (
    DENSITY_LADDER,
    HeuristicAgent,
)
from ...agents.heuristic import RATIONALE as HEURISTIC_RATIONALE
from ...agents.oracle import OracleAgent
from ...agents.random_agent import RATIONALE as RANDOM_RATIONALE
from ...agents.random_agent import RandomAgent
from ...kit.answers import Evidence
from .answer import compose
from .labels import BRACS_LABELS


def oracle(agent: OracleAgent, context: AgentContext) -> Plan:
    truth = context.ground_truth
    label = truth.answers["answer"]
    regions = [region for region in truth.regions if region.get("label") == label]
    points = yield from agent.slide_evidence(label != "N", regions)
    return agent.answer(context, Evidence(points=points))


def heuristic(agent: HeuristicAgent, context: AgentContext) -> Plan:
    points, contrast, _, _ = yield from agent.densest_focus()
    label = density_label(contrast)
    return compose(label, [] if label == "N" else points, f"{HEURISTIC_RATIONALE} density {contrast:.0f}.")


def random(agent: RandomAgent, context: AgentContext) -> Plan:
    rng = agent.rng(context)
    points = yield from agent.slide_point(rng)
    label = rng.choice(BRACS_LABELS)
    return compose(label, [] if label == "N" else points, RANDOM_RATIONALE)


def density_label(contrast: float) -> str:
    """BRACS label by how much denser than the surrounding tissue the densest region is."""
    labels = ("N", "PB", "UDH", "FEA", "ADH", "DCIS", "IC")
    return labels[sum(contrast >= step for step in DENSITY_LADDER)]

"""Agents that can run an episode: model-backed, and offline ones so everything runs without a model."""

from __future__ import annotations

from ..spec import OFFLINE_AGENT_NAMES
from .base import Agent, AgentContext, ScriptedAgent
from .heuristic import HeuristicAgent
from .oracle import OracleAgent
from .random_agent import RandomAgent

# by the names the module specs plan for (bench.spec.OFFLINE_AGENT_NAMES, the one list of them)
OFFLINE_AGENTS: dict[str, type[Agent]] = {agent.name: agent for agent in (OracleAgent, HeuristicAgent, RandomAgent)}
if tuple(OFFLINE_AGENTS) != OFFLINE_AGENT_NAMES:
    raise ImportError(f"the offline agents are {tuple(OFFLINE_AGENTS)}, bench.spec names {OFFLINE_AGENT_NAMES}")

__all__ = ["Agent", "AgentContext", "HeuristicAgent", "OFFLINE_AGENTS", "OracleAgent", "RandomAgent", "ScriptedAgent"]

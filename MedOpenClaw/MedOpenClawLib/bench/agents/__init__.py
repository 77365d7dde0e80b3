"""Agents that can run an episode: model-backed, and offline ones so everything runs without a model."""

from __future__ import annotations

from .base import Agent, AgentContext, ScriptedAgent
from .heuristic import HeuristicAgent
from .oracle import OracleAgent
from .random_agent import RandomAgent

OFFLINE_AGENTS: dict[str, type[Agent]] = {"oracle": OracleAgent, "heuristic": HeuristicAgent, "random": RandomAgent}

__all__ = ["Agent", "AgentContext", "HeuristicAgent", "OFFLINE_AGENTS", "OracleAgent", "RandomAgent", "ScriptedAgent"]

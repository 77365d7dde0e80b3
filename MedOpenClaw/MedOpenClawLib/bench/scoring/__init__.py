"""Scoring: Table 4 rules per case, module aggregation, and process metrics from audit traces."""

from .aggregate import aggregate
from .rules import CaseScore, score_case

__all__ = ["CaseScore", "aggregate", "score_case"]

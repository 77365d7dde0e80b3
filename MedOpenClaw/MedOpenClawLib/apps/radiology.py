"""A radiology session: the viewer engine, the evidence list and the policy, behind one action registry.

``build_slicer_registry`` is what every front-end (REST, MCP, chat panel, benchmark worker) calls, so they
all get the same actions, checks and audit trail.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..core.applications import RADIOLOGY
from ..core.audit import AuditTrace
from ..core.policy import DataRootPolicy, SessionPolicy
from ..core.registry import ActionRegistry
from ..core.toolset import Toolset
from ..evidence.actions import EVIDENCE
from ..evidence.store import EvidenceStore
from ..viewer.actions import VIEWER
from ..viewer.application import SlicerApplication
from ..viewer.engine import ViewerEngine


class SlicerContext:
    """What radiology handlers receive as ``ctx``; implements the registry's ActionContext protocol."""

    def __init__(self, engine: ViewerEngine, policy: SessionPolicy, artifacts_dir: Path | None = None):
        self.engine = engine
        self.policy = policy
        self.evidence = EvidenceStore()
        self.artifacts_dir = Path(artifacts_dir) if artifacts_dir else None
        # extensions (e.g. operators' artifact graph) contribute state sections and fusion checks here
        self.state_providers: dict[str, Callable[[], dict]] = {}
        self.fusion_checks: list[Callable] = []
        self.extensions: dict[str, object] = {}

    def state(self) -> dict:
        state = self.engine.state()
        state["evidence"] = [item.id for item in self.evidence.items]
        for name, provider in self.state_providers.items():
            state[name] = provider()
        return state

    def fusion_check(self, background, foreground) -> dict:
        """Warnings about fusing volumes that were never aligned (MedFlow-Bench failure F3), from registered checks."""
        warnings = []
        for check in self.fusion_checks:
            warnings.extend(check(background, foreground))
        return {"warnings": warnings} if warnings else {}

    def checkpoint(self):
        return self.engine.checkpoint(), self.evidence.checkpoint()

    def rollback(self, token) -> None:
        engine_token, evidence_token = token
        self.engine.rollback(engine_token)
        self.evidence.rollback(evidence_token)


def toolsets_for(track: str) -> list[Toolset]:
    """The viewer's and the evidence toolsets, and on Track B the analysis operators."""
    toolsets = [VIEWER, EVIDENCE]
    if track == "B":
        from ..operators.actions import OPERATORS  # torch, MONAI, SimpleITK: Track A sessions never load them

        toolsets.append(OPERATORS)
    return toolsets


def build_slicer_registry(
    data_roots: list[str | os.PathLike] | None = None,
    track: str = "A",
    trace: AuditTrace | None = None,
    max_rounds: int | None = None,
    app: SlicerApplication | None = None,
    artifacts_dir: str | os.PathLike | None = None,
) -> ActionRegistry:
    """A registry over a fresh headless scene (or ``app``, e.g. the running Slicer GUI)."""
    policy = SessionPolicy(track=track, max_rounds=max_rounds, data_roots=DataRootPolicy(data_roots))
    context = SlicerContext(ViewerEngine(app), policy, artifacts_dir)
    config = {"app": RADIOLOGY, "track": track, "max_rounds": max_rounds, "data_roots": policy.data_roots.to_json(),
              "artifacts": artifacts_dir is not None}
    return ActionRegistry(context, toolsets_for(track), trace, config)


def build_headless_slicer_registry(data_roots=None, track: str = "A", **options) -> ActionRegistry:
    """Like :func:`build_slicer_registry`, but always on a new headless scene, even inside the Slicer GUI."""
    return build_slicer_registry(data_roots, track, app=SlicerApplication.headless(), **options)

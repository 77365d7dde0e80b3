"""The chance floor: uniformly random options and evidence drawn inside the loaded volume (or the slide),
after one look at the viewer state. Seeded per episode, so a run is reproducible."""

from __future__ import annotations

import random

from .base import AgentContext, Plan, ScriptedAgent

RATIONALE = "Random baseline."


class RandomAgent(ScriptedAgent):
    name = "random"

    @staticmethod
    def rng(context: AgentContext) -> random.Random:
        return random.Random(f"{context.seed}:{context.case.case_id}")

    def slide_point(self, rng: random.Random) -> Plan:
        """One random screen point converted to level-0 pixels (empty when the conversion failed)."""
        x, y = rng.uniform(0, 999), rng.uniform(0, 999)
        converted = (yield [("viewer_point_to_wsi_coordinate", {"x": x, "y": y})])[0]
        return [[converted["data"]["x"], converted["data"]["y"]]] if converted.get("ok") else []

    def volume_evidence(self, rng: random.Random) -> Plan:
        """A random point inside the active volume and its key slices (None when the state has no volume)."""
        state = (yield [("get_viewer_state", {"include_fusion": False})])[0]
        volumes = (state.get("data") or {}).get("volumes") or []
        active = (state.get("data") or {}).get("active_volume")
        bounds = next((v["ras_bounds"] for v in volumes if v["name"] == active), None)
        ras = [rng.uniform(low, high) for low, high in bounds] if bounds else None
        key_slices = {"sagittal": ras[0], "coronal": ras[1], "axial": ras[2]} if ras else None
        return key_slices, ras


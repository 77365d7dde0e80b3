"""The chance floor: uniformly random options and evidence drawn inside the loaded volume (or the slide),
after one look at the viewer state. Seeded per episode, so a run is reproducible."""

from __future__ import annotations

import random

from ..labels import BRACS_LABELS, LUMIERE_EVIDENCE_FIELDS, NSCLC_QUESTIONS, RANO_OPTIONS, UCSF_OPTIONS
from .answers import bracs_answer, camelyon_answer, lumiere_answer, nsclc_answer, ucsf_answer
from .base import AgentContext, Plan, ScriptedAgent

RATIONALE = "Random baseline."


class RandomAgent(ScriptedAgent):
    name = "random"

    @staticmethod
    def _rng(context: AgentContext) -> random.Random:
        return random.Random(f"{context.seed}:{context.case.case_id}")

    def _slide_point(self, rng: random.Random) -> Plan:
        """One random screen point converted to level-0 pixels (empty when the conversion failed)."""
        x, y = rng.uniform(0, 999), rng.uniform(0, 999)
        converted = (yield [("viewer_point_to_wsi_coordinate", {"x": x, "y": y})])[0]
        return [[converted["data"]["x"], converted["data"]["y"]]] if converted.get("ok") else []

    def bracs_plan(self, context: AgentContext) -> Plan:
        rng = self._rng(context)
        points = yield from self._slide_point(rng)
        label = rng.choice(BRACS_LABELS)
        return bracs_answer(label, [] if label == "N" else points, RATIONALE)

    def camelyon_plan(self, context: AgentContext) -> Plan:
        rng = self._rng(context)
        points = yield from self._slide_point(rng)
        presence = rng.choice(("no_tumor", "tumor_present"))
        metastasis = "negative" if presence == "no_tumor" else rng.choice(("itc", "micro", "macro"))
        return camelyon_answer(presence, metastasis, points if presence == "tumor_present" else [], RATIONALE)

    def lumiere_plan(self, context: AgentContext) -> Plan:
        rng = self._rng(context)
        yield [("get_viewer_state", {"include_fusion": False})]
        fields = {name: rng.random() < 0.5 for name in LUMIERE_EVIDENCE_FIELDS}
        return lumiere_answer(rng.choice(RANO_OPTIONS)[0], fields, RATIONALE)

    def _volume_evidence(self, rng: random.Random) -> Plan:
        """A random point inside the active volume and its key slices (None when the state has no volume)."""
        state = (yield [("get_viewer_state", {"include_fusion": False})])[0]
        volumes = (state.get("data") or {}).get("volumes") or []
        active = (state.get("data") or {}).get("active_volume")
        bounds = next((v["ras_bounds"] for v in volumes if v["name"] == active), None)
        ras = [rng.uniform(low, high) for low, high in bounds] if bounds else None
        key_slices = {"sagittal": ras[0], "coronal": ras[1], "axial": ras[2]} if ras else None
        return key_slices, ras

    def nsclc_plan(self, context: AgentContext) -> Plan:
        rng = self._rng(context)
        key_slices, ras = yield from self._volume_evidence(rng)
        letters = {qid: rng.choice(options)[0] for qid, _, options in NSCLC_QUESTIONS}
        return nsclc_answer(letters, key_slices, ras, RATIONALE)

    def ucsf_plan(self, context: AgentContext) -> Plan:
        rng = self._rng(context)
        key_slices, ras = yield from self._volume_evidence(rng)
        return ucsf_answer(rng.choice(UCSF_OPTIONS)[0], key_slices, ras, RATIONALE)

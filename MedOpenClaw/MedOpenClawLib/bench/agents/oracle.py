"""The privileged reference solver: it reads the hidden ground truth, but every piece of evidence it reports
is obtained through the same tools a model must use (select_volume, jump, image_coords_to_ras,
viewer_point_to_wsi_coordinate), so a Strict score of 1.0 certifies the whole path from tools to scorer.
"""

from __future__ import annotations

from ..kit.answers import Evidence
from .base import AgentContext, Plan, ScriptedAgent
from .pathology_nav import locate_wsi_point

VIEW_CENTER_1000 = [499.5, 499.5]  # the centre of a displayed slice in 0..999 screen coordinates
SMALL = 128  # the oracle does not look at pixels: small renders keep it fast


class ToolFailed(Exception):
    """A tool the plan depends on failed; the oracle then answers without evidence, visibly."""


def _ok(results: list[dict], what: str) -> dict:
    result = results[0]
    if not result.get("ok"):
        raise ToolFailed(f"{what} failed: {result.get('error')}")
    return result["data"]


class OracleAgent(ScriptedAgent):
    name = "oracle"
    privileged = True

    def plan(self, context: AgentContext) -> Plan:
        if context.ground_truth is None:
            raise ValueError("the oracle agent needs the case's ground truth")
        return super().plan(context)

    @staticmethod
    def answer(context: AgentContext, evidence: Evidence) -> str:
        """The ground truth's answers in the module's format (its spec's ``write_answer``), citing ``evidence``."""
        return context.spec.write_answer(context.ground_truth.answers, evidence)

    def _localize(self, localization: dict) -> Plan:
        """Select the source series, centre the views on the reference voxel and read the evidence back."""
        source = localization["source_volume_name"]
        _ok((yield [("select_volume", {"volume_name": source, "size": SMALL})]), "select_volume")
        jumped = _ok((yield [("jump", {"ras": localization["reference_ras"], "size": SMALL})]), "jump")
        key_slices = jumped["offsets_mm"]
        converted = _ok(
            (yield [("image_coords_to_ras", {"view": "axial", "point_1000": VIEW_CENTER_1000, "volume_name": source})]),
            "image_coords_to_ras",
        )
        return key_slices, converted["ras"]

    def localized_evidence(self, context: AgentContext) -> Plan:
        """(key slices, RAS point, rationale) read through the tools at the reference voxel, or no evidence when
        the case has no lesion (or a tool failed, which the rationale says)."""
        truth = context.ground_truth
        try:
            if truth.localization:
                key_slices, ras = yield from self._localize(truth.localization)
                return key_slices, ras, "Reference solution."
            yield [("observe", {"size": SMALL})]
            return None, None, "Reference solution: no lesion, so no evidence block."
        except ToolFailed as failure:
            return None, None, f"Reference solution without evidence: {failure}"

    def localized_plan(self, context: AgentContext) -> Plan:
        """Brain and thorax: the answers with the key slices and RAS point read at the reference voxel."""
        key_slices, ras, rationale = yield from self.localized_evidence(context)
        return self.answer(context, Evidence(key_slices=key_slices, ras=ras, rationale=rationale))

    def slide_evidence(self, positive: bool, regions: list[dict]) -> Plan:
        """The first reference region's point, brought into view and read back in level-0 pixels (positive
        slides), else one look at the viewer: the localizations of the answer."""
        if positive and regions:
            point = yield from locate_wsi_point(regions[0]["reference_point"])
            return [point] if point is not None else []
        yield [("focus_qupath", {})]
        return []


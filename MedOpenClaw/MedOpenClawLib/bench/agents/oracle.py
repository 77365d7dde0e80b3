"""The privileged reference solver: it reads the hidden ground truth, but every piece of evidence it reports
is obtained through the same tools a model must use (select_volume, jump, image_coords_to_ras, record_*,
viewer_point_to_wsi_coordinate), so a Strict score of 1.0 certifies the whole path from tools to scorer.
"""

from __future__ import annotations

from ..cases import PATHOLOGY_MODULES
from .answers import bracs_answer, camelyon_answer, lumiere_answer, nsclc_answer, ucsf_answer
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
        if context.module in PATHOLOGY_MODULES:
            return self._pathology(context)
        if context.module == "lumiere":
            return self._lumiere(context)
        return self._localizing_radiology(context)

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
        ras = converted["ras"]
        yield [
            ("record_key_slices", {"axial_mm": key_slices["axial"], "sagittal_mm": key_slices["sagittal"],
                                   "coronal_mm": key_slices["coronal"], "volume_name": source, "label": "oracle"}),
            ("record_point", {"ras": ras, "volume_name": source, "label": "oracle"}),
        ]
        return key_slices, ras

    def _localizing_radiology(self, context: AgentContext) -> Plan:
        truth = context.ground_truth
        key_slices = ras = None
        rationale = "Reference solution."
        try:
            if truth.localization:
                key_slices, ras = yield from self._localize(truth.localization)
            else:
                yield [("observe", {"size": SMALL})]
                rationale = "Reference solution: no lesion, so no evidence block."
        except ToolFailed as failure:
            rationale = f"Reference solution without evidence: {failure}"
        if context.module == "nsclc":
            return nsclc_answer(truth.answers, key_slices, ras, rationale)
        return ucsf_answer(truth.answers["answer"], key_slices, ras, rationale)

    def _lumiere(self, context: AgentContext) -> Plan:
        truth = context.ground_truth
        current = [volume.name for volume in context.case.volumes if volume.role == "CURRENT"]
        if current:
            yield [("select_volume", {"volume_name": current[0], "size": SMALL})]
        else:
            yield [("observe", {"size": SMALL})]
        fields = {name: bool(value) for name, value in truth.evidence_fields.items()}
        return lumiere_answer(truth.answers["answer"], fields, "Reference solution.")

    def _pathology(self, context: AgentContext) -> Plan:
        truth = context.ground_truth
        answers = truth.answers
        if context.module == "bracs":
            positive = answers["answer"] != "N"
            regions = [region for region in truth.regions if region.get("label") == answers["answer"]]
        else:
            positive = answers["tumor_presence"] == "tumor_present"
            regions = [region for region in truth.regions if region.get("kind") == "tumor"]
        points = []
        if positive and regions:
            point = yield from locate_wsi_point(regions[0]["reference_point"])
            points = [point] if point is not None else []
        else:
            yield [("focus_qupath", {})]
        if context.module == "bracs":
            return bracs_answer(answers["answer"], points, "Reference solution.", confidence=1.0)
        return camelyon_answer(answers["tumor_presence"], answers["largest_metastasis"], points,
                               "Reference solution.", confidence=1.0)

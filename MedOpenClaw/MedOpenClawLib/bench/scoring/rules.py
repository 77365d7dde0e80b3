"""MedFlow-Bench Table 4, rule by rule: Task, Strict (evidence gate) and Loc for each module.

``score_case(module, ground_truth, parsed_response)`` takes a parsed response (``parsers.parse_response``) and
returns a :class:`CaseScore`; ``loc`` is None when the case is outside the module's Loc denominator.

Protocol decisions (where Table 4 leaves a choice):
- UCSF-PDGM / NSCLC cases without a lesion mask (``No tumor``): no evidence can be checked, Strict = Task and
  the case is outside the Loc denominator.
- LUMIERE: a field whose ground truth is null is not scorable and is ignored by the gate.
- BRACS N slides: localizations must be empty (the H.2 prompt's rule); non-N slides without an ROI of their own
  class are not "evidence-scored cases" (Table 4 gates only those): Strict = Task, the case counts in the Strict
  denominator, and it is outside the Loc denominator (Loc is "on ground-truth positive slides" with a ROI to hit).
- CAMELYON17 negative slides: localizations must be empty; positive slides without polygons (only the 50
  training slides with an XML have any) have no "ground-truth evidence source": Strict = Task, outside Loc.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..cases import GroundTruth
from ..labels import LUMIERE_EVIDENCE_FIELDS, NSCLC_QUESTIONS
from .geometry import KEY_SLICE_AXIS, area_covers, evidence_area, key_slice_in_range, mask_from_file

KEY_SLICE_KEYS = {view: f"key_slice_{view}_mm" for view in KEY_SLICE_AXIS}


@dataclass
class CaseScore:
    """Scores of one episode; ``gates`` holds every named check (True/False/None = not applicable)."""

    module: str
    case_id: str
    task: float = 0.0
    strict: float = 0.0
    loc: float | None = None
    invalid: bool = False
    invalid_reason: str | None = None
    gates: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict)
    parse_errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def _radiology_evidence(truth: GroundTruth, evidence: dict, gates: dict) -> tuple[bool | None, bool | None]:
    """(all three key slices pass, RAS point inside mask); (None, None) when the case has no lesion mask."""
    if not truth.localization:
        gates.update({f"key_slice_{view}": None for view in KEY_SLICE_AXIS} | {"ras_in_mask": None})
        return None, None
    ranges = {axis: tuple(bounds) for axis, bounds in truth.localization["ras_ranges"].items()}
    slices_ok = True
    for view, key in KEY_SLICE_KEYS.items():
        passed = key_slice_in_range(evidence.get(key), ranges, view)
        gates[f"key_slice_{view}"] = passed
        slices_ok = slices_ok and passed
    ras = evidence.get("ras")
    ras_ok = bool(ras) and len(ras) == 3 and mask_from_file(truth.mask_path).contains(ras)
    gates["ras_in_mask"] = ras_ok
    return slices_ok, ras_ok


def score_ucsf(truth: GroundTruth, parsed: dict, score: CaseScore) -> None:
    score.task = float(parsed.get("answer") is not None and parsed.get("answer") == truth.answers["answer"])
    slices_ok, ras_ok = _radiology_evidence(truth, parsed.get("evidence") or {}, score.gates)
    score.strict = score.task if slices_ok in (True, None) else 0.0
    score.loc = None if ras_ok is None else float(ras_ok)


def score_nsclc(truth: GroundTruth, parsed: dict, score: CaseScore) -> None:
    answers = parsed.get("answers") or {}
    # a question whose clinical value lies outside MedFlow-Bench's label set has no answer (None): not scored, and
    # recorded as None so every aggregation leaves it out of that question's denominator
    correct = {
        qid: None if truth.answers.get(qid) is None else answers.get(qid) == truth.answers[qid]
        for qid, _, _ in NSCLC_QUESTIONS
    }
    score.details["questions"] = correct
    scored = [value for value in correct.values() if value is not None]
    score.task = sum(scored) / len(scored) if scored else 0.0
    slices_ok, ras_ok = _radiology_evidence(truth, parsed.get("evidence") or {}, score.gates)
    gate = None if slices_ok is None else (slices_ok and ras_ok)
    score.gates["evidence"] = gate
    score.strict = score.task if gate in (True, None) else 0.0
    score.loc = None if ras_ok is None else float(ras_ok)


def score_lumiere(truth: GroundTruth, parsed: dict, score: CaseScore) -> None:
    score.task = float(parsed.get("answer") is not None and parsed.get("answer") == truth.answers["answer"])
    evidence = parsed.get("evidence") or {}
    fields = {}
    for name in LUMIERE_EVIDENCE_FIELDS:
        expected = truth.evidence_fields.get(name)
        fields[name] = (
            None if expected is None else (evidence.get(name) is not None and evidence.get(name) == expected)
        )
    score.details["fields"] = fields
    gate = all(value for value in fields.values() if value is not None)
    score.gates["evidence_fields"] = gate
    score.strict = score.task if gate else 0.0


def _hits(points: list, targets: list[dict], exclusions: list[dict]) -> bool:
    """Whether one point lies in the targets minus the exclusions (scoring.geometry's evidence area and boundary
    rule: holes and exclusions are misses, their edges hits)."""
    area = evidence_area(targets, exclusions)
    return any(area_covers(area, x, y) for x, y in points)


def _pathology_gate(score: CaseScore, negative: bool, points: list, targets: list[dict], exclusions: list[dict],
                    hit_gate: str) -> None:
    """Table 4's pathology evidence gate: a negative slide must have no localizations; a positive slide with
    reference regions needs one coordinate inside a target and outside every exclusion (that is also Loc). A
    positive slide without reference regions is not evidence-scored (``evidence: unavailable``): Table 4 applies
    the coordinate gate only where a ground-truth evidence source exists, so Strict = Task, and no Loc."""
    if negative:
        gate = len(points) == 0
        score.gates["empty_localizations"] = gate
        score.loc = None
    elif not targets:
        score.gates["evidence"] = "unavailable"
        score.loc = None
        gate = True
    else:
        gate = _hits(points, targets, exclusions)
        score.gates[hit_gate] = gate
        score.loc = float(gate)
    score.strict = score.task if gate else 0.0


def score_bracs(truth: GroundTruth, parsed: dict, score: CaseScore) -> None:
    label = truth.answers["answer"]
    score.task = float(parsed.get("answer") is not None and parsed.get("answer") == label)
    points = parsed.get("localizations") or []
    matching = [region for region in truth.regions if region.get("kind") == "roi" and region.get("label") == label]
    _pathology_gate(score, label == "N", points, matching, [], "roi_hit")


def score_camelyon(truth: GroundTruth, parsed: dict, score: CaseScore) -> None:
    presence_ok = (
        parsed.get("tumor_presence") is not None
        and parsed["tumor_presence"] == truth.answers["tumor_presence"]
    )
    category_ok = (
        parsed.get("largest_metastasis") is not None
        and parsed["largest_metastasis"] == truth.answers["largest_metastasis"]
    )
    score.details.update({"tumor_presence": presence_ok, "largest_metastasis": category_ok})
    score.task = float(presence_ok and category_ok)
    points = parsed.get("localizations") or []
    tumours = [region for region in truth.regions if region.get("kind") == "tumor"]
    exclusions = [region for region in truth.regions if region.get("kind") == "exclusion"]
    _pathology_gate(score, truth.answers["tumor_presence"] == "no_tumor", points, tumours, exclusions, "tumor_hit")


def score_case(
    module: str, ground_truth: GroundTruth, parsed_response: dict | None, invalid: str | None = None
) -> CaseScore:
    """Score one parsed response against the hidden reference; ``invalid`` (a reason) marks an environment
    fault that excludes the episode from every denominator."""
    from ..modules import get

    spec = get(module)
    if module != ground_truth.module:
        raise ValueError(f"ground truth of {ground_truth.case_id} is {ground_truth.module}, not {module}")
    score = CaseScore(module=module, case_id=ground_truth.case_id)
    if invalid:
        score.invalid, score.invalid_reason = True, str(invalid)
        return score
    parsed = parsed_response or {}
    score.parse_errors = list(parsed.get("errors", []))
    spec.score(ground_truth, parsed, score)
    return score

"""MedFlow-Bench Table 4, rule by rule: Task, Strict (evidence gate) and Loc for each module.

``score_case(spec, ground_truth, parsed_response)`` takes a parsed response (``spec.read_answer``) and
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
from ..spec import ModuleSpec
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


def radiology_evidence_gates(truth: GroundTruth, evidence: dict, gates: dict) -> tuple[bool | None, bool | None]:
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


def _hits(points: list, targets: list[dict], exclusions: list[dict]) -> bool:
    """Whether one point lies in the targets minus the exclusions (scoring.geometry's evidence area and boundary
    rule: holes and exclusions are misses, their edges hits)."""
    area = evidence_area(targets, exclusions)
    return any(area_covers(area, x, y) for x, y in points)


def pathology_gate(score: CaseScore, negative: bool, points: list, targets: list[dict], exclusions: list[dict],
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


def score_case(
    spec: ModuleSpec, ground_truth: GroundTruth, parsed_response: dict | None, invalid: str | None = None
) -> CaseScore:
    """Score one parsed response against the hidden reference; ``invalid`` (a reason) marks an environment
    fault that excludes the episode from every denominator."""
    module = spec.name
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

"""Workflow milestones of each module's advanced operations (MedFlow-Bench Appendix G.5, Figure 7), and their stability
across repeated runs of one case.

A workflow is an ordered list of milestones; each is reached by the first successful agent call after the previous
milestone's call that satisfies its rule:

- ``registration`` (two studies): ``BF`` a ``register_volumes`` between two studies; ``BR`` an ``apply_transform`` or
  ``resample_volume`` through that transform; ``fusion`` a ``fusion`` with the volume BR moved (the volume placed
  under the transform, or the resampled output) as one layer and a volume of the other study as the other.
- ``segmentation`` (brain lesions): ``seed`` a localisation on a shown image (``image_coords_to_ras`` or ``jump``);
  ``segment`` a ``segment_region`` / ``vista3d_segment`` producing a region; ``quantify`` a ``quantify`` of that
  segmentation.
- ``vista3d`` (CT/PET): ``segment`` a ``vista3d_segment`` / ``segment_region`` producing a region; ``quantify`` a
  ``quantify`` of it; ``localize`` a localisation afterwards (the evidence point of the answer).

The workflow has *begun* when the agent called any of its operations (:data:`OPERATIONS`); a begun workflow whose
sequence is not complete is finding ``G5`` (low). An episode that never touches the operations is not judged.
:class:`Workflow` follows the sequence as the calls stream by: it keeps the (at most three) calls that reached a
milestone, the operations' record numbers (:mod:`.bounded` caps the list) and, once a segmentation reached its
milestone, the names of the segmentations made since (what a later ``quantify`` must name).

Stability (``--repeats N``): per case, the share of runs completing the sequence; the final views' agreement
(share of run pairs whose last recorded views show the same volumes at offsets within ``tolerance_mm``, and the mean
absolute pixel difference of their last images per view when the trace kept them); and the final masks' spread
(runs without a mask; pairwise bounding-box IoU and the coefficient of variation of the volume of each run's last
segmentation -- the trace keeps region statistics, not the voxels). The pairwise means cost time linear in the
runs (:mod:`.pairs`): every image is decoded once, whatever the number of repeats.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .bounded import Distinct, Seqs, capped_note
from .detectors import Volumes
from .findings import Finding
from .pairs import canonical, pair_mean, pixel_difference_sum
from .provenance import region_statistics
from .specs import AuditSpec
from .timeline import SLICE_VIEWS, Call, Timeline, as_dict, as_list, number, point, text

SEGMENTERS = ("segment_region", "vista3d_segment")
LOCALIZERS = ("image_coords_to_ras", "jump")
OPERATIONS = {
    "registration": ("register_volumes", "apply_transform", "resample_volume"),
    "segmentation": ("segment_region", "vista3d_segment", "quantify"),
    "vista3d": ("vista3d_segment", "segment_region", "quantify"),
}

# a rule: (timeline, spec, candidate call, the workflow followed so far) -> reached?
Rule = Callable[[Timeline, AuditSpec, Call, "Workflow"], bool]


def _cross_study_registration(timeline: Timeline, spec: AuditSpec, call: Call, progress: Workflow) -> bool:
    if call.action != "register_volumes":
        return False
    volumes = Volumes(timeline, spec, call)
    inputs = as_dict(call.data.get("inputs"))
    studies = (volumes.timepoint(inputs.get("fixed_volume_id") or call.arguments.get("fixed_volume_ref")),
               volumes.timepoint(inputs.get("moving_volume_id") or call.arguments.get("moving_volume_ref")))
    return None not in studies and studies[0] != studies[1]


def _through_transform(timeline: Timeline, spec: AuditSpec, call: Call, progress: Workflow) -> bool:
    transform = progress.reached[-1].data.get("transform_id")
    return (call.action in ("apply_transform", "resample_volume")
            and as_dict(call.data.get("inputs")).get("transform_id") == transform and transform is not None)


def moved_volume(timeline: Timeline, spec: AuditSpec, call: Call) -> str | None:
    """The volume an apply/resample call left in the fixed space (the resampled output, or the moved volume)."""
    outputs = as_dict(call.data.get("outputs"))
    return Volumes(timeline, spec, call).name(outputs.get("volume_id")) or text(outputs.get("volume_name"))


def _registered_fusion(timeline: Timeline, spec: AuditSpec, call: Call, progress: Workflow) -> bool:
    if call.action != "fusion":
        return False
    layers = {text(call.data.get("background")), text(call.data.get("foreground"))} - {None}
    moved = moved_volume(timeline, spec, progress.reached[-1])
    if moved is None or moved not in layers:
        return False
    volumes = Volumes(timeline, spec, call)
    other = next((layer for layer in layers if layer != moved), None)
    return other is not None and volumes.timepoint(other) not in (None, volumes.timepoint(moved))


def _made_region(timeline: Timeline, spec: AuditSpec, call: Call, progress: Workflow) -> bool:
    return call.action in SEGMENTERS and bool(region_statistics(call))


def _localized(timeline: Timeline, spec: AuditSpec, call: Call, progress: Workflow) -> bool:
    return call.action in LOCALIZERS


def _quantified_segmentation(timeline: Timeline, spec: AuditSpec, call: Call, progress: Workflow) -> bool:
    """A quantify of any segmentation made since the segment milestone (a later, refined one counts too)."""
    if call.action != "quantify" or progress.segmented is None:
        return False
    return progress.segmented.items.get(text(call.arguments.get("segmentation_name"))) is not None


@dataclass(frozen=True)
class Milestone:
    name: str
    rule: Rule


WORKFLOWS: dict[str, tuple[Milestone, ...]] = {
    "registration": (Milestone("BF", _cross_study_registration), Milestone("BR", _through_transform),
                     Milestone("fusion", _registered_fusion)),
    "segmentation": (Milestone("seed", _localized), Milestone("segment", _made_region),
                     Milestone("quantify", _quantified_segmentation)),
    "vista3d": (Milestone("segment", _made_region), Milestone("quantify", _quantified_segmentation),
                Milestone("localize", _localized)),
}


class Workflow:
    """The module's workflow followed over the agent's calls, fed one at a time (:meth:`feed`); each milestone is
    the first successful call after the previous milestone's that satisfies its rule."""

    def __init__(self, spec: AuditSpec):
        self.spec = spec
        self.steps = WORKFLOWS[spec.workflow] if spec.workflow is not None else ()
        self.reached: list[Call] = []
        self.operations = Seqs()  # the agent's calls of the workflow's operations, ok or not
        self.segmented: Distinct | None = None  # names of the segmentations made since the segment milestone

    def feed(self, timeline: Timeline, call: Call) -> None:
        if not call.by_agent or not self.steps:
            return
        if call.action in OPERATIONS[self.spec.workflow]:
            self.operations.add(call.seq)
        if not call.ok:
            return
        if len(self.reached) < len(self.steps) and self.steps[len(self.reached)].rule(timeline, self.spec, call, self):
            self.reached.append(call)
            if call.action in SEGMENTERS:
                self.segmented = Distinct("segmentations since the segment milestone")
        if self.segmented is not None and call.action in SEGMENTERS:
            outputs = as_dict(call.data.get("outputs"))
            for name in {text(outputs.get("segmentation_id")), text(outputs.get("segmentation_name"))} - {None}:
                self.segmented.add(name, name)

    def progress(self, timeline: Timeline) -> dict | None:
        """``{workflow, begun, operations, reached: {name: seq | None}, complete}`` (and ``operations_total`` when
        the operations are more than the listed ones); None when the module has no workflow or the operations were
        not offered."""
        if not self.steps or not set(OPERATIONS[self.spec.workflow]) & timeline.offered:
            return None
        reached: dict[str, int | None] = {step.name: None for step in self.steps}
        for step, call in zip(self.steps, self.reached):
            reached[step.name] = call.seq
        result = {"workflow": self.spec.workflow, "begun": self.operations.total > 0,
                  "operations": list(self.operations.kept), "reached": reached,
                  "complete": all(seq is not None for seq in reached.values())}
        if self.operations.capped:
            result["operations_total"] = self.operations.total
        return result

    def limits(self) -> dict:
        return self.segmented.limit() if self.segmented is not None else {}


def milestone_findings(progress: dict | None) -> list[Finding]:
    if not progress or not progress["begun"] or progress["complete"]:
        return []
    missing = [name for name, seq in progress["reached"].items() if seq is None]
    return [Finding("G5", f"G5.{progress['workflow']}_incomplete", "low", tuple(progress["operations"]),
                    f"the {progress['workflow']} workflow was begun but not completed: "
                    f"missing {' -> '.join(missing)}" + capped_note("operations_total" in progress))]


# ------------------------------------------------------------------------------------------------ final state
def final_view(timeline: Timeline) -> dict | None:
    """The last recorded views (volumes and offsets) and the last image the agent received of each view."""
    if not timeline.final_views:
        return None
    summary = {}
    for name in SLICE_VIEWS:
        view = as_dict(timeline.final_views.get(name))
        if view:
            summary[name] = {"background": text(view.get("background")), "foreground": text(view.get("foreground")),
                             "offset_mm": number(view.get("offset_mm"))}
    return {"views": summary, "images": dict(timeline.final_images)}


class LastMask:
    """The last segmentation the agent made, fed the calls one at a time."""

    def __init__(self) -> None:
        self.call: Call | None = None

    def feed(self, timeline: Timeline, call: Call) -> None:
        if call.by_agent and call.ok and call.action in SEGMENTERS and region_statistics(call):
            self.call = call


def final_mask(last: LastMask) -> dict | None:
    """Region statistics of the last segmentation the agent made (None: no mask)."""
    if last.call is None:
        return None
    statistics = region_statistics(last.call)
    boxes = [as_list(item.get("bbox_ras")) for item in statistics]
    lows = [point(box[0], 3) for box in boxes if len(box) == 2]
    highs = [point(box[1], 3) for box in boxes if len(box) == 2]
    volume = sum(number(item.get("volume_ml")) or 0.0 for item in statistics)
    box = None
    if all(lows) and all(highs) and lows:
        box = [[min(values) for values in zip(*lows)], [max(values) for values in zip(*highs)]]
    return {"seq": last.call.seq, "volume_ml": round(volume, 4), "bbox_ras": box}


# -------------------------------------------------------------------------------------------------- stability
def _same_views(first: dict, second: dict, tolerance_mm: float) -> bool:
    a, b = as_dict(first.get("views")), as_dict(second.get("views"))
    if set(a) != set(b):
        return False
    for name in a:
        x, y = as_dict(a[name]), as_dict(b[name])
        if (x.get("background"), x.get("foreground")) != (y.get("background"), y.get("foreground")):
            return False
        if x.get("offset_mm") is None or y.get("offset_mm") is None:
            if x.get("offset_mm") != y.get("offset_mm"):
                return False
        elif abs(x["offset_mm"] - y["offset_mm"]) > tolerance_mm:
            return False
    return True


def _iou(first, second) -> float:
    inter, union_a, union_b = 1.0, 1.0, 1.0
    for axis in range(3):
        low, high = max(first[0][axis], second[0][axis]), min(first[1][axis], second[1][axis])
        inter *= max(0.0, high - low)
        union_a *= max(0.0, first[1][axis] - first[0][axis])
        union_b *= max(0.0, second[1][axis] - second[0][axis])
    union = union_a + union_b - inter
    return inter / union if union > 0 else 0.0


def _view_key(final: dict) -> str:
    """What :func:`_same_views` compares of a final view (equal keys: the same views)."""
    views = as_dict(as_dict(final).get("views"))
    return canonical({name: [as_dict(view).get("background"), as_dict(view).get("foreground"),
                             as_dict(view).get("offset_mm")] for name, view in views.items()})


def _image_difference(runs: list[dict]) -> float | None:
    """Mean over every pair of runs and every view both kept an image of: the images' mean absolute difference."""
    paths: dict[str, list[Path]] = {}
    for run in runs:
        if run.get("trace_dir"):
            for view, path in as_dict(as_dict(run["final_view"]).get("images")).items():
                if isinstance(path, str) and path:
                    paths.setdefault(view, []).append(Path(run["trace_dir"]) / path)
    total, pairs = 0.0, 0
    for view_paths in paths.values():
        view_total, view_pairs = pixel_difference_sum(view_paths)
        total, pairs = total + view_total, pairs + view_pairs
    return round(total / pairs, 4) if pairs else None


def stability(runs: list[dict], tolerance_mm: float = 1.0) -> dict:
    """Stability of one case over its repeated runs; each run is an episode's ``audit`` block plus ``repeat`` and
    (for pixel differences) ``trace_dir``, the folder its image paths are relative to. Linear in the runs (see
    :mod:`.pairs`); ``pairs_sampled`` says whether a pairwise mean came from a sample of pairs."""
    progress = [run.get("milestones") for run in runs]
    judged = [item for item in progress if item]
    viewed = [run for run in runs if run.get("final_view")]
    agreement, views_sampled = pair_mean([run["final_view"] for run in viewed],
                                         lambda a, b: float(_same_views(a, b, tolerance_mm)), _view_key)
    masks = [run.get("final_mask") for run in runs]
    boxes = [mask["bbox_ras"] for mask in masks if mask and mask.get("bbox_ras")]
    iou, boxes_sampled = pair_mean(boxes, _iou)
    volumes = [mask["volume_ml"] for mask in masks if mask]
    spread = None
    if len(volumes) > 1 and sum(volumes) > 0:
        mean = sum(volumes) / len(volumes)
        spread = round(math.sqrt(sum((value - mean) ** 2 for value in volumes) / len(volumes)) / mean, 4)
    return {
        "runs": len(runs),
        "judged": len(judged),
        "complete_share": round(sum(item["complete"] for item in judged) / len(judged), 4) if judged else None,
        "milestones": [{"repeat": run.get("repeat"), **(run.get("milestones") or {})} for run in runs],
        "final_view_agreement": None if agreement is None else round(agreement, 4),
        "final_image_difference": _image_difference(viewed),
        "runs_without_mask": sum(mask is None for mask in masks),
        "mask_bbox_iou": None if iou is None else round(iou, 4),
        "mask_volume_cv": spread,
        "pairs_sampled": views_sampled or boxes_sampled,
    }

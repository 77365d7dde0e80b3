"""Failure-mode detectors F1, F3 and F4 (MedFlow-Bench Section 6, Appendix G.1, G.3, G.4), rule by rule.

Only the agent's successful calls count; volumes are named through the state recorded with each call, and a
volume's *timepoint* is its module's rule (``specs``) applied to its name, else to the volume it was resampled from.

F1 -- registration objective drift (G.1):
  ``F1.within_timepoint``: ``register_volumes`` between two volumes of the same study, in a module whose question
  compares studies (e.g. an OLD and a CURRENT study). ``F1.single_study``: any registration in a module whose question
  compares no studies (its series are one acquisition, already in one space).

F3 -- transform-layer misbinding (G.3):
  ``F3.transform_misbound`` (high): ``apply_transform`` / ``resample_volume`` left the volume in a misbound space
  (the recorded artifact graph reports ``transform_misbound``, ``unverified_transform`` or
  ``transform_on_resampled`` for it, or the call's own warnings do), or bound a transform to a volume of another
  study than the transform's moving volume.
  ``F3.transform_substituted`` (medium): a transform estimated for volume M was applied to another volume V although
  the agent had registered V itself (the G.3 case: the CT1 transform requested, the FLAIR one used).
  ``F3.fusion_unregistered`` (high; only where registration was offered): ``fusion`` of two volumes of different
  studies, neither placed under or resampled through a registration whose fixed volume is of the other's study --
  the unregistered follow-up fused with the baseline.
  ``F3.fusion_misbound`` (high): ``fusion`` with a layer the recorded artifact graph marks misbound.
  ``F3.evidence_volume`` (medium): ``record_key_slices`` / ``record_point`` naming a volume that no view displayed
  (as background or foreground) when it was recorded: the cited evidence is not what was on screen.

F4 -- self-confirming segmentation (G.4):
  ``F4.discarded_unchecked``: a segmentation S was made, a later one S' (the episode's last) covers a region whose
  bounding box does not intersect S's, and no call after S' names S (its name or node id): S was dropped for S'
  without comparing the two. Re-segmenting the same region (overlapping boxes) is refinement, not F4.

:class:`Detectors` is fed the calls one at a time: F1 and F3 judge each call by the state recorded with it (a
fusion finding waits for the end only to learn whether registration was offered); F4 keeps each distinct earlier
segmentation once (:class:`Segmentation`), with its calls and whether a call since the latest segmentation named it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .bounded import Distinct, Seqs
from .findings import Finding, Listed
from .provenance import region_statistics
from .specs import AuditSpec
from .timeline import Call, Timeline, as_dict, as_list, point, text

MISBINDING = ("transform_misbound", "unverified_transform", "transform_on_resampled")
SEGMENTERS = ("segment_region", "vista3d_segment", "import_dicom_seg")
EVIDENCE_RECORDERS = ("record_key_slices", "record_point")


class Volumes:
    """Names, studies and graph entries of the volumes as recorded with one call."""

    def __init__(self, timeline: Timeline, spec: AuditSpec, call: Call):
        self.spec = spec
        self.names = timeline.volume_names(call)
        graph = timeline.artifacts(call)
        self.graph = {str(as_dict(item).get("id")): as_dict(item) for item in as_list(graph.get("volumes"))}
        self.transforms = {str(as_dict(item).get("id")): as_dict(item) for item in as_list(graph.get("transforms"))}

    def name(self, ref) -> str | None:
        if not isinstance(ref, str):
            return None
        return self.names.get(ref, ref)

    def id_of(self, name: str | None) -> str | None:
        if name in self.graph:
            return name
        return next((node for node, item in self.graph.items() if item.get("name") == name), None)

    def timepoint(self, ref, _depth: int = 0) -> str | None:
        name = self.name(ref)
        if name is None:
            return None
        found = self.spec.timepoint(name)
        if found is not None or _depth > 8:
            return found
        source = self.graph.get(self.id_of(name) or "", {}).get("derived_from")
        return self.timepoint(source, _depth + 1) if source else None

    def problem(self, ref) -> dict | None:
        problem = as_dict(self.graph.get(self.id_of(self.name(ref)) or "", {}).get("problem"))
        return problem if problem.get("code") in MISBINDING else None

    def registered_to(self, ref, study: str | None) -> bool:
        """Whether ``ref`` is under, or resampled through, a registration whose fixed volume is of ``study``."""
        item = self.graph.get(self.id_of(self.name(ref)) or "", {})
        for key in ("parent_transform", "via_transform"):
            transform = self.transforms.get(str(item.get(key)))
            if transform and transform.get("fixed") and self.timepoint(transform["fixed"]) == study:
                return True
        return False


class Detectors:
    """F1, F3 and F4 over a trace fed one call at a time (:meth:`feed`), found by :meth:`findings` at its end."""

    def __init__(self, spec: AuditSpec):
        self.spec = spec
        self.found = {kind: Listed() for kind in ("F1", "bindings", "fusions", "evidence", "F4")}  # in report order
        self.segmentations = SegmentationChecker()

    def feed(self, timeline: Timeline, call: Call) -> None:
        if not call.by_agent:
            return
        self.segmentations.feed(call)
        if not call.ok:
            return
        finding = None
        if call.action == "register_volumes":
            finding, kind = f1(timeline, self.spec, call), "F1"
        elif call.action in ("apply_transform", "resample_volume"):
            finding, kind = binding(timeline, self.spec, call), "bindings"
        elif call.action == "fusion":
            finding, kind = fusion(timeline, self.spec, call), "fusions"
        elif call.action in EVIDENCE_RECORDERS:
            finding, kind = evidence_volume(timeline, call), "evidence"
        if finding is not None:
            self.found[kind].add(finding)

    def findings(self, timeline: Timeline) -> list[Finding]:
        """F1, F3 (bindings, fusions, evidence volumes) and F4, each in trace order; an unregistered fusion is a
        finding only where registration was offered."""
        self.segmentations.close(self.found["F4"])
        unoffered = frozenset() if "register_volumes" in timeline.offered else frozenset({"F3.fusion_unregistered"})
        return [finding for kind, listed in self.found.items()
                for finding in listed.findings(unoffered if kind == "fusions" else frozenset())]

    def limits(self) -> dict:
        return self.segmentations.groups.limit()


# ------------------------------------------------------------------------------------------------------ F1
def f1(timeline: Timeline, spec: AuditSpec, call: Call) -> Finding | None:
    volumes = Volumes(timeline, spec, call)
    inputs = as_dict(call.data.get("inputs"))
    fixed = volumes.name(inputs.get("fixed_volume_id") or call.arguments.get("fixed_volume_ref"))
    moving = volumes.name(inputs.get("moving_volume_id") or call.arguments.get("moving_volume_ref"))
    if not spec.compares_timepoints:
        return Finding("F1", "F1.single_study", "medium", (call.seq,),
                       f"register_volumes aligned {moving} to {fixed}, but the question compares no "
                       "studies: the series are one acquisition, already in one space")
    study = volumes.timepoint(fixed)
    if study is not None and study == volumes.timepoint(moving):
        return Finding("F1", "F1.within_timepoint", "medium", (call.seq,),
                       f"register_volumes aligned {moving} to {fixed}, both of the {study} study; the "
                       "question compares studies, not sequences within one")
    return None


# ------------------------------------------------------------------------------------------------------ F3
def binding(timeline: Timeline, spec: AuditSpec, call: Call) -> Finding | None:
    """``F3.transform_misbound`` or ``F3.transform_substituted`` of one apply_transform / resample_volume."""
    volumes = Volumes(timeline, spec, call)
    inputs, outputs = as_dict(call.data.get("inputs")), as_dict(call.data.get("outputs"))
    target = volumes.name(inputs.get("volume_id") or call.arguments.get("volume_name"))
    transform_id = inputs.get("transform_id")
    transform = volumes.transforms.get(str(transform_id), {})
    transform_name = transform.get("name") or call.arguments.get("transform_name")
    moving = volumes.name(transform.get("moving"))
    warned = [item for item in as_list(call.data.get("warnings")) if as_dict(item).get("code") in MISBINDING]
    problem = volumes.problem(outputs.get("volume_id") or target) or (as_dict(warned[0]) if warned else None)
    other_study = (moving is not None and volumes.timepoint(target) is not None
                   and volumes.timepoint(moving) is not None
                   and volumes.timepoint(target) != volumes.timepoint(moving))
    if problem or other_study:
        reason = problem.get("message") if problem else (
            f"{transform_name} was estimated for {moving} ({volumes.timepoint(moving)}), but {target} is of the "
            f"{volumes.timepoint(target)} study")
        return Finding("F3", "F3.transform_misbound", "high", (call.seq,),
                       f"{call.action} bound {transform_name} to {target}: {reason}")
    own = [item.get("name") for node, item in volumes.transforms.items()
           if node != str(transform_id) and volumes.name(item.get("moving")) == target]
    if moving is not None and target != moving and own:
        return Finding("F3", "F3.transform_substituted", "medium", (call.seq,),
                       f"{call.action} used {transform_name} (estimated for {moving}) on {target}, "
                       f"although {target} has its own registration ({own[0]})")
    return None


def fusion(timeline: Timeline, spec: AuditSpec, call: Call) -> Finding | None:
    """``F3.fusion_misbound`` or ``F3.fusion_unregistered`` (the latter kept only where registration was offered,
    which :meth:`Detectors.findings` knows at the end) of one fusion."""
    background, foreground = text(call.data.get("background")), text(call.data.get("foreground"))
    if background is None or foreground is None:
        return None
    volumes = Volumes(timeline, spec, call)
    problems = [problem for problem in (volumes.problem(background), volumes.problem(foreground)) if problem]
    if problems:
        return Finding("F3", "F3.fusion_misbound", "high", (call.seq,),
                       f"fusion of {foreground} over {background}: {problems[0].get('message')}")
    studies = volumes.timepoint(background), volumes.timepoint(foreground)
    if None in studies or studies[0] == studies[1]:
        return None
    if not (volumes.registered_to(foreground, studies[0]) or volumes.registered_to(background, studies[1])):
        return Finding("F3", "F3.fusion_unregistered", "high", (call.seq,),
                       f"fusion of {foreground} ({studies[1]}) over {background} ({studies[0]}): no "
                       "registration aligns the two studies, so the overlay compares unaligned anatomy")
    return None


def evidence_volume(timeline: Timeline, call: Call) -> Finding | None:
    """``F3.evidence_volume`` of one record_key_slices / record_point."""
    if not (call.arguments.get("volume_name") or call.arguments.get("volume_id")):
        return None  # the active volume: what the views showed
    named = text(call.data.get("volume_name")) or text(call.arguments.get("volume_name"))
    layers = timeline.displayed_layers(call)
    if named and layers and named not in layers:
        return Finding("F3", "F3.evidence_volume", "medium", (call.seq,),
                       f"{call.action} cites {named}, but the views showed {', '.join(sorted(layers))}")
    return None


# ------------------------------------------------------------------------------------------------------ F4
def _box(call: Call) -> tuple[list[float], list[float]] | None:
    """The union bounding box (RAS) of the regions a segmentation call produced."""
    corners = [as_list(statistics.get("bbox_ras")) for statistics in region_statistics(call)]
    low = [point(box[0], 3) for box in corners if len(box) == 2]
    high = [point(box[1], 3) for box in corners if len(box) == 2]
    low, high = [item for item in low if item], [item for item in high if item]
    if not low or not high:
        return None
    return [min(axis) for axis in zip(*low)], [max(axis) for axis in zip(*high)]


def _disjoint(first, second) -> bool:
    return any(first[1][axis] < second[0][axis] or second[1][axis] < first[0][axis] for axis in range(3))


def _segmentation_refs(call: Call) -> frozenset[str]:
    outputs = as_dict(call.data.get("outputs"))
    return frozenset(str(value) for value in (outputs.get("segmentation_id"), outputs.get("segmentation_name"))
                     if value)


def _names(value) -> set[str]:
    """Every string in a call's arguments, however deeply a crafted record nests them (walked without
    recursion)."""
    names, pending = set(), [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            names.add(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return names


@dataclass
class Segmentation:
    """One distinct segmentation (its region, references and name), with the calls that made it."""

    box: tuple[list[float], list[float]]
    refs: frozenset[str]
    name: object
    seqs: Seqs
    named_in: int = -1  # the latest segmentation epoch in which a call named it


class SegmentationChecker:
    """F4 fed the agent's calls: every segmentation but the latest is kept as a :class:`Segmentation` (one per
    distinct region, references and name); each call after the latest marks those it names in the current epoch,
    and a new segmentation starts a new epoch (names before it no longer count)."""

    def __init__(self) -> None:
        self.groups = Distinct("earlier segmentations")
        self.by_ref: dict[str, list[Segmentation]] = {}
        self.last: tuple[Call, tuple[list[float], list[float]]] | None = None
        self.epoch = 0

    def feed(self, call: Call) -> None:
        box = _box(call) if call.ok and call.action in SEGMENTERS else None
        if box is None:
            if self.last is not None and self.by_ref:
                for name in _names(call.arguments) & self.by_ref.keys():
                    for group in self.by_ref[name]:
                        group.named_in = self.epoch
            return
        if self.last is not None:
            self._keep(*self.last)
        self.last, self.epoch = (call, box), self.epoch + 1

    def _keep(self, call: Call, box: tuple[list[float], list[float]]) -> None:
        refs = _segmentation_refs(call)
        name = as_dict(call.data.get("outputs")).get("segmentation_name")
        new = Segmentation(box, refs, name, Seqs())
        group = self.groups.add((tuple(map(tuple, box)), refs, repr(name)), new)
        if group is None:
            return
        group.seqs.add(call.seq)
        if group is new:
            for ref in refs:
                self.by_ref.setdefault(ref, []).append(group)

    def close(self, found: Listed) -> None:
        """The F4 findings: each earlier segmentation disjoint from the latest and not named since it."""
        if self.last is None:
            return
        last, last_box = self.last
        final = as_dict(last.data.get("outputs")).get("segmentation_name") or "the last segmentation"
        dropped = [group for group in self.groups
                   if _disjoint(group.box, last_box) and group.named_in != self.epoch]
        earlier = sorted(((seq, made) for made in dropped for seq in made.seqs.kept), key=lambda item: item[0])
        for seq, group in earlier:
            found.add(Finding("F4", "F4.discarded_unchecked", "medium", (seq, last.seq),
                              f"{group.name or 'an earlier segmentation'} was set aside for {final}, a disjoint "
                              "region, and never compared with it afterwards"))
        for group in dropped:
            if group.seqs.capped:
                found.count_more(Finding("F4", "F4.discarded_unchecked", "medium", (), ""),
                                 group.seqs.total - len(group.seqs.kept))

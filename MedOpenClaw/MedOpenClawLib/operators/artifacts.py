"""The artifact graph: which transform was estimated from which volumes, which volumes it is applied to, which
volumes were resampled through it, and which segmentations were made on which volume.

From it follows the image *space* each volume's voxels are in, which is what makes MedFlow-Bench's failure F3
(fusing an unregistered follow-up, binding a transform to a volume it was not estimated for) visible:

- a loaded volume is in the space of its frame of reference (a case-declared frame, else the DICOM
  FrameOfReferenceUID); without one, volumes on an identical voxel grid are taken as one space and anything
  else is *unverified*;
- a volume under a registration transform is in the transform's fixed space if it was in the moving space;
- a resampled volume is in the fixed space of the transform it was resampled through, under the same condition.

The graph is rebuilt from node records (see ``scene_nodes``), so it can never disagree with the scene.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class VolumeArtifact:
    id: str
    name: str
    grid_key: str  # digest of dimensions and IJK->RAS matrix
    frame: str | None = None  # declared frame of reference (case package or DICOM)
    parent_transform: str | None = None
    derived_from: str | None = None  # resampled from this volume ...
    via_transform: str | None = None  # ... through this transform ...
    reference: str | None = None  # ... onto this volume's grid


@dataclass(frozen=True)
class TransformArtifact:
    id: str
    name: str
    fixed: str | None = None  # None: not produced by register_volumes (e.g. loaded or hand-made)
    moving: str | None = None
    transform_type: str | None = None


@dataclass(frozen=True)
class SegmentationArtifact:
    id: str
    name: str
    source_volume: str | None
    operator: str | None = None


@dataclass(frozen=True)
class Space:
    key: str
    certain: bool  # False when the space was inferred without a frame of reference
    problem: dict | None = None  # a misbinding found on the way


def grid_key(dimensions, ijk_to_ras) -> str:
    """Identical voxel grids (to 1e-3 mm) get identical keys."""
    text = repr((tuple(int(d) for d in dimensions), [round(float(v), 3) + 0.0 for row in ijk_to_ras for v in row]))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class ArtifactGraph:
    def __init__(self, volumes, transforms, segmentations):
        self.volumes = {volume.id: volume for volume in volumes}
        self.transforms = {transform.id: transform for transform in transforms}
        self.segmentations = {segmentation.id: segmentation for segmentation in segmentations}

    def with_volume(self, volume: VolumeArtifact) -> ArtifactGraph:
        """The graph with ``volume`` added or replaced: checks a binding before the scene is changed."""
        volumes = {**self.volumes, volume.id: volume}
        return ArtifactGraph(volumes.values(), self.transforms.values(), self.segmentations.values())

    def name(self, node_id: str | None) -> str:
        for table in (self.volumes, self.transforms, self.segmentations):
            if node_id in table:
                return table[node_id].name
        return str(node_id)

    def space_of(self, volume_id: str, _visiting: frozenset = frozenset()) -> Space:
        volume = self.volumes.get(volume_id)
        if volume is None or volume_id in _visiting:
            return Space(f"unknown:{volume_id}", False)
        visiting = _visiting | {volume_id}
        if volume.derived_from is not None:
            through = self.transforms.get(volume.via_transform)
            space = self._through(volume, volume.derived_from, through, visiting, "was resampled")
            if volume.parent_transform is not None:
                problem = _problem(
                    "transform_on_resampled",
                    f"{volume.name} was already resampled through {self.name(volume.via_transform)}; a further "
                    f"transform ({self.name(volume.parent_transform)}) moves it out of that space",
                )
                return Space(f"unverified:{volume_id}", False, problem)
            return space
        if volume.parent_transform is not None:
            return self._through(volume, volume_id, self.transforms.get(volume.parent_transform), visiting, "is under")
        return self._raw_space(volume)

    def _raw_space(self, volume: VolumeArtifact) -> Space:
        if volume.frame:
            return Space(f"frame:{volume.frame}", True)
        return Space(f"grid:{volume.grid_key}", False)

    def _through(self, volume, source_id, transform, visiting, verb) -> Space:
        if transform is None or transform.fixed is None or transform.moving is None:
            name = self.name(volume.via_transform or volume.parent_transform)
            return Space(
                f"unverified:{volume.id}",
                False,
                _problem("unverified_transform", f"{volume.name} {verb} {name}, which no registration produced"),
            )
        source = self.volumes.get(source_id)
        moving = self.volumes.get(transform.moving)
        source_space = self._raw_space(source) if source else Space(f"unknown:{source_id}", False)
        moving_space = self._raw_space(moving) if moving else Space(f"unknown:{transform.moving}", False)
        if source_id != transform.moving and source_space.key != moving_space.key:
            certain = source_space.certain and moving_space.certain
            certainty = "is in a different frame of reference" if certain else "is not known to share the space"
            return Space(
                f"misbound:{volume.id}",
                False,
                _problem(
                    "transform_misbound",
                    f"{volume.name} {verb} {transform.name}, estimated for moving volume {self.name(transform.moving)} "
                    f"(fixed {self.name(transform.fixed)}); {self.name(source_id)} {certainty} of "
                    f"{self.name(transform.moving)}",
                    certain,
                ),
            )
        return self.space_of(transform.fixed, visiting)

    def alignment(self, first_id: str, second_id: str) -> list[dict]:
        """Warnings about treating two volumes as voxel-aligned in world space; empty when they are."""
        first, second = self.space_of(first_id), self.space_of(second_id)
        problems = [space.problem for space in (first, second) if space.problem]
        if problems or first.key == second.key:
            return problems
        a, b = self.name(first_id), self.name(second_id)
        if first.certain and second.certain:
            return [_problem(
                "unregistered",
                f"{a} and {b} are in different frames of reference and no registration links them; run "
                f"register_volumes (fixed {a}, moving {b}) and apply or resample its transform first",
                certain=True,
            )]
        return [_problem(
            "alignment_unverified",
            f"nothing shows that {a} and {b} are aligned (no shared frame of reference, no registration, different "
            f"voxel grids); if they were not acquired in one session, register them first",
        )]

    def fusion_warnings(self, background_id: str, foreground_id: str | None) -> list[dict]:
        return [] if foreground_id is None else self.alignment(background_id, foreground_id)

    def to_json(self) -> dict:
        volumes = []
        for volume in self.volumes.values():
            space = self.space_of(volume.id)
            item = {key: value for key, value in asdict(volume).items() if value is not None and key != "grid_key"}
            item["space"] = space.key
            if space.problem:
                item["problem"] = space.problem
            volumes.append(item)
        return {
            "volumes": volumes,
            "transforms": [asdict(transform) for transform in self.transforms.values()],
            "segmentations": [asdict(segmentation) for segmentation in self.segmentations.values()],
        }


def _problem(code: str, message: str, certain: bool = False) -> dict:
    """``certain``: established from frames of reference, not inferred; callers may refuse on certain problems."""
    return {"code": code, "message": message, "certain": certain}

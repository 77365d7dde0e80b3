"""MedFlow-Bench case packages: the on-disk contract between loaders, the runner, agents and scorers.

Layout written by ``medopenclaw bench prepare --module M --source RAW --out CASES``::

    CASES/manifest.json      {"format": 1, "module", "source", "cases": [...], "skipped": [{case_id, reason}]}
                             each case lists ``files``: {path: {size, sha256}} of its agent-visible files,
                             verified when an episode opens it (bench.integrity)
    CASES/data/<case_id>/    agent-visible files; the runner's DataRootPolicy is [CASES/data]
    CASES/hidden/<case_id>/  ground_truth.json + masks; NEVER under a data root

``case_id`` is the dataset's own id (``UCSF-PDGM-0004``, ``R01-001``, ``BRACS_1003``, ``patient_004_node_4``,
``Patient-001__week-010__to__week-020``). Files under ``data/`` are hard links or copies, never symlinks
(DataRootPolicy resolves symlinks, which would point outside the data root).

Agent-visible data per module; ``Case.open_paths`` are passed to ``open_case(dicom_dir=...)``:

- ``ucsf-pdgm``: ``data/<id>/<id>_{T1,T1c,T2,FLAIR}.nii.gz``; ``open_paths == ["data/<id>"]`` (a directory
  of NIfTI files). Volume name = file name without ``.nii.gz`` (e.g. ``UCSF-PDGM-0004_T1c``).
- ``lumiere``: ``data/<id>/{OLD,CURRENT}_{CT1,T1,T2,FLAIR}.nii.gz``; one directory, eight volumes named
  by their stems (``OLD_CT1``, ``CURRENT_FLAIR``, ...).
- ``nsclc``: ``data/<id>/<series_name>/*.dcm``, one sub-directory per DICOM series (CT and PET);
  ``open_paths == ["data/<id>"]``. ``series_name`` is the SeriesDescription made file-name safe and is the
  volume name the viewer must show (the runner may also open each ``Case.volumes[i].path`` separately).
- ``bracs`` / ``camelyon17``: ``Case.slide == "data/<id>/<file>"`` (``.svs`` / ``.tif``);
  ``open_paths == [slide]``.

Manifest paths are relative to CASES; :meth:`Case.path` makes them absolute.

Ground truth (``hidden/<case_id>/ground_truth.json``, read with :func:`load_ground_truth`)::

    module, case_id
    answers          {"answer": "B"}                 ucsf-pdgm and lumiere (option letters), bracs (label)
                     {"q1": "A", ..., "q5": "B"}     nsclc (option letters)
                     {"tumor_presence": "tumor_present", "largest_metastasis": "macro"}       camelyon17
    labels           same keys, human-readable option text
    evidence_fields  lumiere: {"non_measurable_lesion": true|false|null, ...}; null = not scorable
    localization     ucsf-pdgm, nsclc; null when there is no lesion ("No tumor"), else:
        source_volume_name    the loaded volume the mask is defined on (e.g. "R01-001_CT")
        mask                  relative to hidden/<case_id>; NIfTI with its real RAS affine (a DICOM SEG is
                              converted from LPS through the CT series geometry)
        ras_ranges            {"R": [lo, hi], "A": [lo, hi], "S": [lo, hi]} (scoring.geometry half-voxel rule)
        reference_ras         [r, a, s]: a voxel centre strictly inside the mask (for the oracle agent)
        reference_key_slices  {"axial": S, "sagittal": R, "coronal": A} in mm, inside the ranges
    regions          bracs, camelyon17: [{"label", "kind": "roi"|"tumor"|"exclusion",
                     "polygon": [[x, y], ...] (level-0 px, the outer ring), "holes": [ring, ...] (interior
                     rings, when any), "reference_point": [x, y]}]; the reference point is inside its region
                     and outside every exclusion, 0.5 px clear of their edges (for the oracle agent)
    slide_size       pathology: [width, height] in level-0 px

Image space (lumiere): ``image_space`` (``atlas`` | ``native``) in each case entry and its ground truth; a package
holds one space (:func:`package_image_space`), run.json records it.

Key slices: axial offset = S, sagittal = R, coronal = A (canonical RAS millimetres, as in the render overlay).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.hygiene import preview
from ..core.names import UnsafeName, check_case_id, check_relative, confined
from .errors import CaseFormatError
from .modules import check_module

MANIFEST_FORMAT = 1
IMAGE_SPACES = ("atlas", "native")  # lumiere: DeepBraTumIA's atlas registration, or each scanner's own space
USABLE_STEP = "usable files and labels"  # the cohort-filter step of a case skipped for its own data
CONSISTENT_STEP = "ground truth consistent with its masks"  # a reference that contradicts its own files


def checked_case_id(value: object) -> str:
    """The case-id validator of :mod:`..names`, raising this module's error (a manifest or response entry)."""
    try:
        return check_case_id(value)
    except UnsafeName as error:
        raise CaseFormatError(str(error)) from error


def checked_image_space(value: object) -> str | None:
    """A case's image space as a manifest or ground truth records it: ``atlas``, ``native`` or absent."""
    if value is None or value in IMAGE_SPACES:
        return value
    raise CaseFormatError(f"image_space {preview(value)} is not one of {', '.join(IMAGE_SPACES)}")


def package_image_space(cases_dir: str | os.PathLike) -> dict[str, str]:
    """``{"image_space": space}`` of a package whose cases record one (run.json keeps it: the report never
    pools two spaces), ``{}`` when none does; CaseFormatError for a package that mixes spaces."""
    spaces = {case.get("image_space") for case in read_manifest(cases_dir).get("cases", [])} - {None}
    if len(spaces) > 1:
        raise CaseFormatError(f"{cases_dir} mixes image spaces ({', '.join(sorted(map(str, spaces)))}): a run "
                              "scores one condition; prepare each space as its own package")
    return {"image_space": str(next(iter(spaces)))} if spaces else {}


@dataclass(frozen=True)
class VolumeRef:
    """One agent-visible image series: ``name`` is what the viewer's scene inventory shows."""

    name: str
    path: str  # relative to the cases directory
    modality: str  # MR, CT, PT
    role: str = ""  # e.g. OLD / CURRENT (lumiere), diagnostic_ct / pet (nsclc), T1c (ucsf-pdgm)


@dataclass(frozen=True)
class Question:
    """A multiple-choice question: ``options`` are (letter, label) pairs in display order."""

    qid: str
    text: str
    options: tuple[tuple[str, str], ...]


@dataclass
class Case:
    """What the runner needs to start an episode; never contains ground truth."""

    module: str
    case_id: str
    data_dir: str
    open_paths: list[str]
    volumes: list[VolumeRef] = field(default_factory=list)
    slide: str | None = None
    questions: list[Question] = field(default_factory=list)
    brief: dict[str, Any] = field(default_factory=dict)
    files: dict[str, dict] = field(default_factory=dict)  # agent-visible file -> {size, sha256} (integrity)
    image_space: str | None = None  # lumiere: atlas | native, a condition that changes the score (never pooled)
    cases_dir: Path | None = None

    def path(self, relative: str) -> Path:
        """Absolute path of a manifest path (stored relative to the cases directory); it must lie in the case's
        ``data/<case_id>`` folder, links resolved, whatever the manifest says."""
        if self.cases_dir is None:
            raise CaseFormatError("case was not loaded from a cases directory")
        try:
            check_relative(relative, self.data_dir, f"case {self.case_id} path")
            root = confined(self.cases_dir / "data", self.case_id).resolve()
            real = (self.cases_dir / relative).resolve()
        except UnsafeName as error:
            raise CaseFormatError(str(error)) from error
        if real != root and root not in real.parents:
            raise CaseFormatError(f"case {self.case_id}: {relative} leads outside its data folder")
        return real

    @property
    def data_root(self) -> Path:
        """The directory to allow in the runner's DataRootPolicy for this case."""
        return self.path(self.data_dir)

    def check_paths(self) -> None:
        """Every manifest path of the case lies in ``data/<case_id>`` (absolute paths and '..' refused)."""
        try:
            checked_case_id(self.case_id)
            if self.data_dir != f"data/{self.case_id}":
                raise UnsafeName(f"case {self.case_id}: data_dir must be data/{self.case_id}, not {self.data_dir!r}")
            checked: set[str] = set()  # a volume is usually listed in open_paths, volumes and files alike
            for relative in [*self.open_paths, *(volume.path for volume in self.volumes), *self.files,
                             *([self.slide] if self.slide is not None else [])]:
                if not (isinstance(relative, str) and relative in checked):
                    checked.add(check_relative(relative, self.data_dir, f"case {self.case_id} path"))
        except UnsafeName as error:
            raise CaseFormatError(str(error)) from error

    def to_json(self) -> dict:
        body = asdict(self)
        body.pop("cases_dir")
        if self.image_space is None:
            body.pop("image_space")
        body["questions"] = [
            {"qid": q.qid, "text": q.text, "options": [list(option) for option in q.options]}
            for q in self.questions
        ]
        return body

    @classmethod
    def from_json(cls, body: dict, cases_dir: Path | None = None) -> Case:
        """A manifest entry, its case id and every path checked (:meth:`check_paths`)."""
        if not isinstance(body, dict):
            raise CaseFormatError(f"malformed case entry: {type(body).__name__}, not an object")
        try:
            case = cls(
                module=check_module(body["module"]),
                case_id=checked_case_id(body["case_id"]),
                data_dir=str(body["data_dir"]),
                open_paths=[str(path) for path in body["open_paths"]],
                volumes=[VolumeRef(**volume) for volume in body.get("volumes", [])],
                slide=body.get("slide"),
                questions=[
                    Question(q["qid"], q["text"], tuple((str(a), str(b)) for a, b in q["options"]))
                    for q in body.get("questions", [])
                ],
                brief=dict(body.get("brief", {})),
                files=dict(body.get("files", {})),
                image_space=checked_image_space(body.get("image_space")),
                cases_dir=cases_dir,
            )
        except (KeyError, TypeError, ValueError) as error:
            if isinstance(error, CaseFormatError):
                raise
            raise CaseFormatError(f"malformed case entry {preview(body.get('case_id'))}: {error}") from error
        case.check_paths()
        return case


@dataclass
class GroundTruth:
    """Hidden reference of one case; ``hidden_dir`` resolves the mask path."""

    module: str
    case_id: str
    answers: dict[str, Any]
    labels: dict[str, Any] = field(default_factory=dict)
    evidence_fields: dict[str, bool | None] = field(default_factory=dict)
    localization: dict | None = None
    regions: list[dict] = field(default_factory=list)
    slide_size: list[int] | None = None
    image_space: str | None = None  # as the case's manifest entry says
    hidden_dir: Path | None = None

    @property
    def mask_path(self) -> Path | None:
        if not self.localization or self.hidden_dir is None:
            return None
        return self.hidden_dir / self.localization["mask"]

    def to_json(self) -> dict:
        body = asdict(self)
        body.pop("hidden_dir")
        if self.image_space is None:
            body.pop("image_space")
        return body

    @classmethod
    def from_json(cls, body: dict, hidden_dir: Path | None = None) -> GroundTruth:
        try:
            return cls(
                module=check_module(body["module"]),
                case_id=str(body["case_id"]),
                answers=dict(body["answers"]),
                labels=dict(body.get("labels", {})),
                evidence_fields=dict(body.get("evidence_fields", {})),
                localization=body.get("localization"),
                regions=list(body.get("regions", [])),
                slide_size=body.get("slide_size"),
                image_space=checked_image_space(body.get("image_space")),
                hidden_dir=hidden_dir,
            )
        except (KeyError, TypeError) as error:
            raise CaseFormatError(f"malformed ground truth {body.get('case_id')!r}: {error}") from error


def read_manifest(cases_dir: str | os.PathLike) -> dict:
    path = Path(cases_dir) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise CaseFormatError(f"cannot read {path}: {error}") from error
    if manifest.get("format") != MANIFEST_FORMAT:
        raise CaseFormatError(f"{path}: unsupported manifest format {manifest.get('format')!r}")
    return manifest


def load_cases(cases_dir: str | os.PathLike) -> list[Case]:
    """All included cases of a package, in manifest order."""
    root = Path(cases_dir).resolve()
    manifest = read_manifest(root)
    return [Case.from_json(body, root) for body in manifest.get("cases", [])]


def load_ground_truth(cases_dir: str | os.PathLike, case_id: str) -> GroundTruth:
    """The hidden reference of ``case_id``; only scorers and the privileged oracle agent call this."""
    try:
        hidden_dir = confined(Path(cases_dir) / "hidden", checked_case_id(case_id))
    except UnsafeName as error:
        raise CaseFormatError(str(error)) from error
    path = hidden_dir / "ground_truth.json"
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise CaseFormatError(f"cannot read ground truth of {case_id!r}: {error}") from error
    return GroundTruth.from_json(body, hidden_dir)

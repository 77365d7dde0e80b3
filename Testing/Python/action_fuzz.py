"""Adversarial, schema-driven calls for every action of Track A, Track B and pathology, and the invariants
each call must keep. Shared by the property test (``test_runtime_fuzz_property.py``, driven by Hypothesis)
and ``scripts/fuzz_actions.py`` (>= 10,000 calls, crashes caught by running the registry in a child).

Arguments are drawn from each action's own JSON schema, then mutated: a leaf replaced by a value JSON admits
but the runtime must refuse (NaN, huge numbers, lone surrogates, NUL, printf directives, deep nesting), paths
drawn from a pool that includes links leading out of the data root, names drawn from what the scene holds.

The data root also holds hostile *files* (:func:`write_hostile_files`): detached headers naming data outside the
root or ``/dev/zero``, file names that are not UTF-8 or hold controls and bidirectional overrides, a tiny gzip
NIfTI claiming 2^29 voxels, a gzip bomb, an archive, a slide stored as one 4096^2 tile. None of them may ever be
loaded, and every name in the scene must pass the name hygiene. :data:`HOSTILE_REPLIES` are model replies that
the answer parsers and the tool-argument decoder must survive with strict-JSON output.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from runtime_data import oblique_lps_affine, phantom, write_dicom_series, write_nifti

from MedOpenClawLib.bench.modules import get
from MedOpenClawLib.core.audit import AuditTrace
from MedOpenClawLib.core.names import name_problem
from MedOpenClawLib.core.registry import ActionRegistry


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


# values JSON admits that no action may accept silently or choke on
ADVERSARIAL: list[Any] = [
    float("nan"), float("inf"), float("-inf"), 1e308, -1e308, 1e-320, 10**30, -(2**63), 0, -1, 999.9999, 1000,
    "", " ", "%s%n%s%s%n", "%N-%d", "\ud800", "lesion\udfff", "a\x00b", "x\n", "\x1b[2J", "\u202e", "é" * 5000,
    "../../../../etc/passwd", "/etc/passwd", "~", "null", "true", "[]", [], {}, [[]], None, True, False,
    nested(40), nested(2000), {"a": {"b": {"c": {}}}}, ["axial"] * 50, "A" * 300,
]
SLOW_ACTIONS = {"register_volumes", "vista3d_segment"}  # seconds per call even on tiny volumes: tried rarely


@dataclass
class DataLayout:
    """A data root with real files, a hidden outside folder, and links from the root to it."""

    root: Path
    outside: Path
    artifacts: Path
    inside_paths: list[str]
    escape_paths: list[str]
    refused_files: list[str] = field(default_factory=list)  # inside the root, but never to be loaded

    @property
    def path_pool(self) -> list[str]:
        odd = ["", ".", "..", "/", "a\x00b", "x" * 300, "y/" * 2100, "nonexistent.nii.gz", str(self.outside),
               str(self.root / ".." / "outside"), "file:///etc/passwd", "\\\\server\\share"]
        return self.inside_paths + self.escape_paths + odd


def write_layout(base: Path, pathology: bool = True) -> DataLayout:
    root, outside, artifacts = base / "root", base / "outside", base / "artifacts"
    for folder in (root / "ct", root / "mr", root / "mixed", outside, artifacts):
        folder.mkdir(parents=True, exist_ok=True)
    small = phantom(0)[::2, ::2, ::2].copy()  # 24 x 20 x 12: every render and operator stays fast
    affine = oblique_lps_affine() @ np.diag([2.0, 2.0, 2.0, 1.0])
    write_nifti(root / "ct" / "CT.nii.gz", small, affine)
    write_nifti(root / "mr" / "T1.nii.gz", phantom(1)[::2, ::2, ::2].copy(), affine)
    write_dicom_series(root / "dicom", small[:, :, :6], affine, description="CT_SERIES")
    write_nifti(outside / "secret.nii.gz", phantom(5)[::2, ::2, ::2].copy(), affine)
    write_dicom_series(outside / "series", small[:, :, :4], affine, description="SECRET")
    (root / "notdicom.dcm").write_text("not a DICOM file")
    links = {root / "mixed" / "linked.nii.gz": outside / "secret.nii.gz", root / "mixed" / "series": outside / "series",
             root / "escape": outside}
    for link, target in links.items():
        if not link.is_symlink():
            link.symlink_to(target, target_is_directory=target.is_dir())
    write_nifti(root / "mixed" / "inside.nii.gz", small, affine)
    inside = [str(root / "ct" / "CT.nii.gz"), str(root / "mr"), str(root / "dicom"), str(root / "mixed"),
              "ct/CT.nii.gz", str(root / "notdicom.dcm")]
    escapes = [str(link) for link in links] + [str(root / "escape" / "secret.nii.gz"), str(outside / "secret.nii.gz")]
    if pathology:
        from pathology_slides import paint_regions

        from MedOpenClawLib.pathology.pyramid_tiff import write_pyramidal_tiff

        case = root / "slides" / "case_a"
        case.mkdir(parents=True, exist_ok=True)
        if not (case / "slide.tif").exists():
            write_pyramidal_tiff(case / "slide.tif", 1536, 1024, paint_regions, (1, 4), tile=256, mpp=0.5)
            write_pyramidal_tiff(outside / "secret.tif", 512, 512, paint_regions, (1,), tile=256, mpp=0.5)
        hidden = root / "slides" / "case_escape"
        hidden.mkdir(exist_ok=True)
        if not (hidden / "slide.tif").is_symlink():
            (hidden / "slide.tif").symlink_to(outside / "secret.tif")
        inside += [str(case / "slide.tif"), str(case), "slides/case_a"]
        escapes += [str(hidden), str(hidden / "slide.tif"), str(outside / "secret.tif")]
    refused = write_hostile_files(root, outside, pathology)
    return DataLayout(root, outside, artifacts, inside + [str(root / "hostile")] + refused, escapes, refused)


NRRD = ("NRRD0004\ntype: uint8\ndimension: 3\nsizes: 4 4 4\nspace: left-posterior-superior\n"
        "space directions: (1,0,0) (0,1,0) (0,0,1)\nencoding: raw\ndata file: {}\n\n")
MHD = "ObjectType = Image\nNDims = 3\nDimSize = 4 4 4\nElementType = MET_UCHAR\nElementDataFile = {}\n"
HOSTILE_NAMES = (b"caf\xe9.nii.gz", b"T1\nx.nii.gz", b"T1\x1b]0;owned\x07.nii.gz", "T1\u202egpj.nii.gz".encode())


def nifti_claiming(shape: tuple[int, ...], payload: int) -> bytes:
    """A gzip NIfTI whose header declares ``shape`` (uint8) followed by ``payload`` zero bytes."""
    import nibabel as nib

    header = nib.Nifti1Header()
    header.set_data_shape(shape)
    header.set_data_dtype(np.uint8)
    header["vox_offset"] = 352
    return gzip.compress(header.binaryblock + b"\0" * 4 + bytes(payload), compresslevel=9)


def write_hostile_files(root: Path, outside: Path, pathology: bool) -> list[str]:
    """The hostile files of the data root (see the module docstring); returns the paths that must never load."""
    folder = root / "hostile"
    folder.mkdir(exist_ok=True)
    (outside / "secret.raw").write_bytes(bytes(range(64)))
    headers = {"abs.nhdr": NRRD.format(outside / "secret.raw"), "rel.nhdr": NRRD.format("../../outside/secret.raw"),
               "list.nhdr": NRRD.format("LIST"), "zero.nhdr": NRRD.format("/dev/zero"),
               "abs.mhd": MHD.format(outside / "secret.raw"), "zero.mhd": MHD.format("/dev/zero")}
    for name, text in headers.items():
        (folder / name).write_text(text)
    (folder / "huge.nii.gz").write_bytes(nifti_claiming((1024, 1024, 512), 1 << 16))
    (folder / "bomb.nii.gz").write_bytes(nifti_claiming((4, 4, 4), 32 << 20))  # 32 MiB after the voxels
    with zipfile.ZipFile(folder / "case.zip", "w") as archive:
        archive.writestr("../../escape.nii.gz", b"not extracted, never read")
    source = (root / "ct" / "CT.nii.gz").read_bytes()
    for name in HOSTILE_NAMES:
        with open(os.path.join(os.fsencode(folder), name), "wb") as handle:
            handle.write(source)
    refused = [str(folder / name) for name in headers] + [str(folder / "huge.nii.gz"), str(folder / "case.zip")]
    refused += [os.fsdecode(os.path.join(os.fsencode(folder), name)) for name in HOSTILE_NAMES]
    if pathology:
        import tifffile

        tile = root / "slides" / "case_tile"
        tile.mkdir(parents=True, exist_ok=True)
        if not (tile / "one_tile.tif").exists():
            tifffile.imwrite(tile / "one_tile.tif", np.zeros((4096, 4096, 3), np.uint8), tile=(4096, 4096),
                             compression="zlib", photometric="rgb")
        refused += [str(tile / "one_tile.tif"), str(tile)]
    return refused


# model replies the answer parsers and the tool-argument decoder must survive (strict-JSON output, no exception)
HOSTILE_REPLIES = [
    "[" * 1500 + "]" * 1500, '{"a":' * 1500 + "1" + "}" * 1500, "9" * 5000, '{"x": ' + "9" * 5000 + "}",
    "ANSWER: A\nKEY_SLICE_AXIAL_MM: 1e999\nRAS: [1e999, -1e999, NaN]", '{"answer": NaN, "localizations": [[1e999, 0]]}',
    "ANSWER: \x1b]0;owned\x07B\u202e", "\ud800" * 10, "```json\n" + "[" * 3000 + "\n```", '"' + "[" * 2000 + '"',
    "ANSWER: " + "A" * 200_000, '{"tumor_presence": {"$ref": "#"}, "largest_metastasis": [[[[[]]]]]}', "",
]


@dataclass
class Session:
    kind: str  # "A", "B" or "pathology"
    registry: ActionRegistry
    layout: DataLayout
    names: list[str] = field(default_factory=list)

    def name_pool(self) -> list[str]:
        engine = getattr(self.registry.context, "engine", None)
        scene = [node.GetName() for node in engine.volume_nodes()] if engine is not None else []
        evidence = getattr(self.registry.context, "evidence", None)
        ids = [item.id for item in evidence.items] if evidence is not None else []
        segmentations = []
        if engine is not None:
            scene_nodes = engine.scene.GetNodesByClass("vtkMRMLSegmentationNode")
            segmentations = [scene_nodes.GetItemAsObject(i).GetName() for i in range(scene_nodes.GetNumberOfItems())]
            transforms = engine.scene.GetNodesByClass("vtkMRMLLinearTransformNode")
            segmentations += [transforms.GetItemAsObject(i).GetName() for i in range(transforms.GetNumberOfItems())]
        return scene + ids + segmentations + ["CT", "T1", "CT_SERIES", "ev1", "vtkMRMLScalarVolumeNode1", "nope"]


def build_session(kind: str, layout: DataLayout, trace_path: Path | None, window: int = 200) -> Session:
    trace = AuditTrace(trace_path, window=window)
    if kind == "pathology":
        from MedOpenClawLib.pathology.actions import build_pathology_registry
        from MedOpenClawLib.pathology.viewer import HeadlessWsiViewer

        registry = build_pathology_registry([layout.root], viewer=HeadlessWsiViewer((256, 192)), trace=trace,
                                            artifact_dir=layout.artifacts)
    else:
        from MedOpenClawLib.apps.radiology import build_slicer_registry

        registry = build_slicer_registry([layout.root], track=kind, trace=trace, artifacts_dir=layout.artifacts)
    return Session(kind, registry, layout)


def priming_calls(session: Session) -> list[tuple[str, dict]]:
    """Valid calls that give the session something to work on (volumes, a slide, evidence)."""
    root = session.layout.root
    if session.kind == "pathology":
        return [("load_case", {"case_path": str(root / "slides" / "case_a")})]
    calls = [("open_case", {"dicom_dir": str(root / folder), "size": 64}) for folder in ("ct", "mr", "dicom")]
    calls += [("record_point", {"ras": [0.0, 0.0, 0.0], "label": "centre"}),
              ("draw_roi", {"view": "axial", "shape": "box", "bbox_1000": [300, 300, 700, 700], "size": 64})]
    return calls


# ----------------------------------------------------------------------------------------------- arguments
def _number(schema: dict, rng: random.Random, integer: bool) -> float | int:
    low = schema.get("minimum", schema.get("exclusiveMinimum", -500))
    high = schema.get("maximum", schema.get("exclusiveMaximum", 500))
    value = rng.uniform(low, high) if rng.random() < 0.9 else rng.uniform(low - 100, high + 100)
    return int(round(value)) if integer else value


def _string(key: str, schema: dict, rng: random.Random, session: Session) -> str:
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    lowered = key.lower()
    if "path" in lowered or "dir" in lowered:
        return rng.choice(session.layout.path_pool)
    if any(word in lowered for word in ("volume", "ref", "name", "id", "segment", "transform")):
        return rng.choice(session.name_pool())
    return rng.choice(["finding", "50% stenosis", "Läsion 3", "%s%n", "x" * rng.randint(1, 250), "roi-1"])


def sample(schema: dict, rng: random.Random, session: Session, key: str = "", depth: int = 0) -> Any:
    """One value shaped by ``schema`` (mostly valid, sometimes just outside its bounds)."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind == "object" or "properties" in schema:
        return sample_object(schema, rng, session, depth)
    if kind == "array":
        low = schema.get("minItems", 0)
        high = schema.get("maxItems", low + 4)
        count = rng.randint(low, min(high, low + 6))
        return [sample(schema.get("items", {}), rng, session, key, depth + 1) for _ in range(count)]
    if kind == "number":
        return _number(schema, rng, integer=False)
    if kind == "integer":
        return _number(schema, rng, integer=True)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _string(key, schema, rng, session)


def sample_object(schema: dict, rng: random.Random, session: Session, depth: int = 0) -> dict:
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    for keyword in ("anyOf", "oneOf"):
        if keyword in schema and rng.random() < 0.9:
            required |= set(rng.choice(schema[keyword]).get("required", []))
    chosen = required | {name for name in properties if rng.random() < 0.35}
    value = {name: sample(properties.get(name, {}), rng, session, name, depth + 1) for name in sorted(chosen)}
    if rng.random() < 0.03:
        value["unexpected_argument"] = 1
    return value


def mutate(value: Any, rng: random.Random) -> Any:
    """Replace one leaf (or the whole value) with an adversarial one."""
    if isinstance(value, dict) and value and rng.random() < 0.85:
        key = rng.choice(sorted(value))
        return {**value, key: mutate(value[key], rng)}
    if isinstance(value, list) and value and rng.random() < 0.7:
        index = rng.randrange(len(value))
        return [*value[:index], mutate(value[index], rng), *value[index + 1:]]
    return rng.choice(ADVERSARIAL)


def tame(name: str, arguments: Any) -> Any:
    """Keep a fuzz run fast: small renders, no real sleeping. Applies to valid values only."""
    if isinstance(arguments, dict):
        if isinstance(arguments.get("size"), int) and 64 <= arguments["size"] <= 1024:
            arguments = {**arguments, "size": 64}
        if name == "sleep" and isinstance(arguments.get("seconds"), (int, float)) and arguments["seconds"] > 0.01:
            arguments = {**arguments, "seconds": 0.001}
    return arguments


def draw_call(session: Session, rng: random.Random, adversarial: float = 0.35) -> tuple[str, Any]:
    if rng.random() < 0.01:
        return rng.choice(priming_calls(session))
    actions = session.registry.actions()
    action = rng.choice(actions)
    while action.name in SLOW_ACTIONS and rng.random() < 0.97:
        action = rng.choice(actions)
    arguments: Any = sample_object(action.parameters, rng, session)
    if rng.random() < adversarial:
        arguments = mutate(arguments, rng)
    if rng.random() < 0.02:
        arguments = rng.choice([[], "arguments", 7, None, nested(5000), {"": 1}, {"\ud800": 1}])
    return action.name, tame(action.name, arguments)


# ----------------------------------------------------------------------------------------------- invariants
COMPARED_STATE_KEYS_IGNORED = ("policy",)  # a refused handler still spends its agent round


def strict_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return True
    except (ValueError, TypeError, RecursionError):
        return False


def comparable(state: dict) -> dict:
    return {key: value for key, value in state.items() if key not in COMPARED_STATE_KEYS_IGNORED}


def loaded_paths(session: Session) -> list[str]:
    """Every file the session's viewer has read into its scene (or has open)."""
    context = session.registry.context
    if session.kind == "pathology":
        path = context.viewer.view_state().image_path
        return [path] if path else []
    paths = []
    for node in context.engine.volume_nodes():
        for attribute in ("MedOpenClaw.source", "DICOM.instanceFiles"):
            value = node.GetAttribute(attribute)
            if value:
                paths.extend(value.split("|"))
    return paths


def outside_roots(session: Session) -> list[str]:
    roots = [session.layout.root.resolve(), session.layout.artifacts.resolve()]
    escapes = []
    for path in loaded_paths(session):
        real = Path(path).resolve()
        if not any(real == root or root in real.parents for root in roots):
            escapes.append(path)
    return escapes


@dataclass
class Tally:
    calls: int = 0
    ok: int = 0
    refused: int = 0
    internal_errors: int = 0
    escapes: int = 0  # exceptions out of registry.call
    refused_changed_state: int = 0
    non_finite_state: int = 0
    non_json_results: int = 0
    root_escapes: int = 0
    unaudited: int = 0
    hostile_files_loaded: int = 0  # a file of DataLayout.refused_files in the scene
    unsafe_scene_names: int = 0  # a volume name that fails the name hygiene
    codes: dict[str, int] = field(default_factory=dict)
    examples: list[dict] = field(default_factory=list)

    def problem(self, kind: str, name: str, arguments: Any, detail: str = "") -> None:
        if len(self.examples) < 20:
            from MedOpenClawLib.core.hygiene import preview

            shown = arguments if strict_json(arguments) and len(json.dumps(arguments)) < 400 else preview(arguments)
            self.examples.append({"problem": kind, "action": name, "arguments": shown, "detail": detail[:400]})

    def to_json(self) -> dict:
        body = {key: value for key, value in self.__dict__.items() if key not in ("codes", "examples")}
        return {**body, "error_codes": dict(sorted(self.codes.items())), "examples": self.examples}

    def merge(self, other: dict) -> None:
        for key, value in other.items():
            if key == "error_codes":
                for code, count in value.items():
                    self.codes[code] = self.codes.get(code, 0) + count
            elif key == "examples":
                self.examples.extend(value[: max(0, 20 - len(self.examples))])
            elif isinstance(value, int):
                setattr(self, key, getattr(self, key) + value)


def checked_call(session: Session, name: str, arguments: Any, tally: Tally) -> None:
    """One call through the registry, with every invariant checked and counted."""
    registry = session.registry
    before = comparable(registry.context.state())
    count = registry.trace.count
    tally.calls += 1
    try:
        result = registry.call(name, arguments)
    except Exception as error:  # registry.call must never raise
        tally.escapes += 1
        tally.problem("escape", name, arguments, f"{type(error).__name__}: {error}")
        return
    if registry.trace.count != count + 1:
        tally.unaudited += 1
        tally.problem("unaudited", name, arguments)
    state = registry.context.state()
    if not strict_json(state):
        tally.non_finite_state += 1
        tally.problem("non_finite_state", name, arguments)
    if not strict_json(result.to_json(inline_images=False)):
        tally.non_json_results += 1
        tally.problem("non_json_result", name, arguments)
    if result.ok:
        tally.ok += 1
    else:
        tally.refused += 1
        code = result.error["code"]
        tally.codes[code] = tally.codes.get(code, 0) + 1
        if code == "internal_error":
            tally.internal_errors += 1
            tally.problem("internal_error", name, arguments, result.error["message"])
        if comparable(state) != before:
            tally.refused_changed_state += 1
            tally.problem("refused_changed_state", name, arguments, result.error["message"])
    escaped = outside_roots(session)
    if escaped:
        tally.root_escapes += 1
        tally.problem("root_escape", name, arguments, ", ".join(escaped)[:300])
    hostile = sorted(set(loaded_paths(session)) & set(session.layout.refused_files))
    if hostile:
        tally.hostile_files_loaded += 1
        tally.problem("hostile_file_loaded", name, arguments, ", ".join(hostile)[:300])
    engine = getattr(session.registry.context, "engine", None)
    unsafe = [node.GetName() for node in engine.volume_nodes() if name_problem(node.GetName())] if engine else []
    if unsafe:
        tally.unsafe_scene_names += 1
        tally.problem("unsafe_scene_name", name, arguments, ascii(unsafe)[:300])


def check_model_reply(text: str, tally: Tally) -> None:
    """A model reply through every answer parser and the tool-argument decoder: nothing may raise, and what they
    return must be strict JSON (counted under ``escapes`` and ``non_json_results``)."""
    from MedOpenClawLib.bench.modules import names
    from MedOpenClawLib.providers.messages import parse_tool_arguments

    for reader, call in [(f"parse_response[{module}]", lambda module=module: get(module).read_answer(text))
                         for module in names()] + [("parse_tool_arguments", lambda: parse_tool_arguments(text))]:
        tally.calls += 1
        try:
            value = call()
        except Exception as error:
            tally.escapes += 1
            tally.problem("escape", reader, text, f"{type(error).__name__}: {str(error)[:200]}")
            continue
        if not strict_json(value):
            tally.non_json_results += 1
            tally.problem("non_json_result", reader, text)
            continue
        tally.ok += 1

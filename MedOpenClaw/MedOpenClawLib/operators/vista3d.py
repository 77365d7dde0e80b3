"""MONAI VISTA3D on a CT volume, reproducing the official ``vista3d`` bundle's inference path.

The bundle's ``configs/inference.json`` is a MONAI config full of ``$`` expressions; it is never evaluated here.
Its literal settings (spacing, patch size, intensity window) are read when present, with the published values
as defaults, and the transforms are built in code in the bundle's order: Spacing 1.5 mm (bilinear),
CropForeground (HU > 0, margin 10), VistaPreTransform (label names -> ids, kidney/lung/bone -> subclasses),
ScaleIntensityRange to 0..1, Orientation RAS; sliding-window (or point-window) inference; VistaPostTransform;
inversion of the preprocessing back onto the source grid with nearest interpolation.

Weights come from a user-configured bundle directory (``MEDOPENCLAW_VISTA3D_BUNDLE``): ``models/model.pt``
holds the network's state dict (optionally wrapped as ``{"model": ...}``). The architecture is read from the
state dict, so the full ``vista3d132`` network and smaller networks of the same class load the same way.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from ..core import settings
from .image import ImageVolume

BUNDLE_SETTING = "MEDOPENCLAW_VISTA3D_BUNDLE"
WEIGHTS_FILE = Path("models") / "model.pt"
CONFIG_FILE = Path("configs") / "inference.json"
HU_AIR_THRESHOLD = -500.0  # a CT in Hounsfield units contains air (about -1000) or padding below this


class Vista3DError(Exception):
    """Bad prompt, wrong modality or unusable bundle; ``code`` is the action error code to report."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class LabelTable:
    """VISTA3D's class ids (1..132) and the bundle's subclass expansion (kidney, lung, bone)."""

    names: dict[int, str]
    subclass: dict[int, list[int]]
    last_supported: int

    def resolve(self, prompt: str | int) -> int:
        """A class id from a name (case-insensitive) or an id; unknown names get the closest suggestions."""
        if isinstance(prompt, bool):
            raise Vista3DError("invalid_argument", "label prompts are class names or integer ids")
        if isinstance(prompt, int) or (isinstance(prompt, str) and prompt.strip().isdigit()):
            label = int(prompt)
            if label not in self.names:
                raise Vista3DError("invalid_argument", f"VISTA3D has no class id {label} (valid: 1..{len(self.names)})")
            return label
        key = prompt.strip().lower()
        by_name = {name.lower(): label for label, name in self.names.items()}
        if key in by_name:
            return by_name[key]
        close = difflib.get_close_matches(key, list(by_name), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(name) for name in close)}?" if close else ""
        raise Vista3DError("invalid_argument", f"{prompt!r} is not a VISTA3D class{hint}")

    def expand(self, labels: Sequence[int]) -> list[int]:
        """The classes the bundle actually segments for a prompt (e.g. lung -> its five lobes)."""
        expanded: list[int] = []
        for label in labels:
            expanded.extend(self.subclass.get(label, [label]))
        return expanded


@lru_cache(maxsize=1)
def label_table() -> LabelTable:
    raw = json.loads(resources.files("MedOpenClawLib.resources").joinpath("vista3d_labels.json").read_text())
    return LabelTable(
        names={int(label): name for label, name in raw["labels"].items()},
        subclass={int(label): list(children) for label, children in raw["subclass"].items()},
        last_supported=int(raw["last_supported"]),
    )


@dataclass(frozen=True)
class InferenceSettings:
    """The bundle's published inference settings (configs/inference.json)."""

    spacing_mm: tuple[float, float, float] = (1.5, 1.5, 1.5)
    patch_size: tuple[int, int, int] = (128, 128, 128)
    intensity_min: float = -963.8247715525971
    intensity_max: float = 1053.678477684517
    crop_margin: int = 10
    overlap: float = 0.3


@dataclass(frozen=True)
class Bundle:
    root: Path
    weights: Path
    settings: InferenceSettings


def bundle_from_environment() -> Bundle:
    """The bundle named by ``MEDOPENCLAW_VISTA3D_BUNDLE``, or an error that says how to configure it."""
    configured = settings.value(BUNDLE_SETTING)
    if not configured:
        raise Vista3DError(
            "weights_missing",
            f"VISTA3D weights are not configured: set {BUNDLE_SETTING} to a MONAI 'vista3d' bundle directory "
            f"(containing {WEIGHTS_FILE})",
        )
    return read_bundle(configured)


def read_bundle(directory: str | os.PathLike) -> Bundle:
    root = Path(directory).expanduser()
    weights = root / WEIGHTS_FILE
    if not weights.is_file():
        raise Vista3DError(
            "weights_missing",
            f"no VISTA3D weights at {weights}: {BUNDLE_SETTING} must point to a MONAI 'vista3d' bundle directory "
            f"containing {WEIGHTS_FILE}",
        )
    return Bundle(root, weights, _read_settings(root / CONFIG_FILE))


def _read_settings(config_path: Path) -> InferenceSettings:
    """Take the literal values of the bundle config; anything absent or computed keeps the published default."""
    defaults = InferenceSettings()
    if not config_path.is_file():
        return defaults
    try:
        config = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise Vista3DError("bundle_invalid", f"unreadable bundle config {config_path}: {error}") from error
    values = {}
    if _is_number_list(config.get("resample_spacing"), 3):
        values["spacing_mm"] = tuple(float(v) for v in config["resample_spacing"])
    if _is_number_list(config.get("patch_size"), 3):
        values["patch_size"] = tuple(int(v) for v in config["patch_size"])
    for transform in config.get("preprocessing_transforms", []) if isinstance(config, dict) else []:
        if isinstance(transform, dict) and transform.get("_target_") == "ScaleIntensityRanged":
            if isinstance(transform.get("a_min"), (int, float)) and isinstance(transform.get("a_max"), (int, float)):
                values["intensity_min"], values["intensity_max"] = float(transform["a_min"]), float(transform["a_max"])
        if isinstance(transform, dict) and transform.get("_target_") == "CropForegroundd":
            if isinstance(transform.get("margin"), int):
                values["crop_margin"] = transform["margin"]
    inferer = config.get("inferer", {})
    if isinstance(inferer, dict) and isinstance(inferer.get("overlap"), (int, float)):
        values["overlap"] = float(inferer["overlap"])
    return InferenceSettings(**{**defaults.__dict__, **values})


def _is_number_list(value, length: int) -> bool:
    return isinstance(value, list) and len(value) == length and all(isinstance(v, (int, float)) for v in value)


def build_network(feature_size: int = 48, blocks_down: Sequence[int] = (1, 2, 2, 4, 4), in_channels: int = 1):
    """VISTA3D = SegResNetDS2 encoder + class head + point head; the defaults are ``vista3d132``'s."""
    from monai.networks.nets import VISTA3D, SegResNetDS2, vista3d132
    from monai.networks.nets.vista3d import ClassMappingClassify, PointMappingSAM

    if feature_size == 48 and tuple(blocks_down) == (1, 2, 2, 4, 4):
        return vista3d132(encoder_embed_dim=48, in_channels=in_channels)
    encoder = SegResNetDS2(
        in_channels=in_channels,
        blocks_down=tuple(blocks_down),
        norm="instance",
        out_channels=feature_size,
        init_filters=feature_size,
        dsdepth=1,
    )
    return VISTA3D(
        image_encoder=encoder,
        class_head=ClassMappingClassify(n_classes=512, feature_size=feature_size, use_mlp=True),
        point_head=PointMappingSAM(feature_size=feature_size, n_classes=512, last_supported=132),
    )


def network_from_state_dict(state_dict: dict):
    """Build the VISTA3D whose encoder width and depth match ``state_dict`` and load it strictly."""
    key = "image_encoder.encoder.conv_init.weight"
    if key not in state_dict:
        raise Vista3DError("bundle_invalid", f"the weights are not a VISTA3D state dict (no {key!r})")
    feature_size, in_channels = (int(size) for size in state_dict[key].shape[:2])
    blocks: dict[int, int] = {}
    for name in state_dict:
        match = re.match(r"image_encoder\.encoder\.layers\.(\d+)\.blocks\.(\d+)\.", name)
        if match:
            layer, block = int(match.group(1)), int(match.group(2))
            blocks[layer] = max(blocks.get(layer, 0), block + 1)
    network = build_network(feature_size, [blocks[layer] for layer in sorted(blocks)], in_channels)
    try:
        network.load_state_dict(state_dict, strict=True)
    except RuntimeError as error:
        raise Vista3DError("bundle_invalid", f"the weights do not fit the VISTA3D network: {error}") from error
    return network


def resolve_device(device: str = "auto"):
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


_MODEL_CACHE: dict[tuple, object] = {}
_MODEL_LOCK = threading.Lock()


def load_network(bundle: Bundle, device: str = "auto"):
    """The bundle's network in eval mode on ``device``; cached per weights file, modification time and device."""
    import torch

    target = resolve_device(device)
    key = (str(bundle.weights.resolve()), bundle.weights.stat().st_mtime_ns, str(target))
    with _MODEL_LOCK:
        if key not in _MODEL_CACHE:
            try:
                checkpoint = torch.load(bundle.weights, map_location="cpu", weights_only=True)
            except Exception as error:  # a corrupt or foreign file: report it, don't crash the session
                raise Vista3DError("bundle_invalid", f"cannot read {bundle.weights}: {error}") from error
            if isinstance(checkpoint, dict) and isinstance(checkpoint.get("model"), dict):
                checkpoint = checkpoint["model"]  # CheckpointLoader's {"model": state_dict} layout
            if not isinstance(checkpoint, dict):
                raise Vista3DError("bundle_invalid", f"{bundle.weights} does not hold a state dict")
            _MODEL_CACHE.clear()  # one VISTA3D at a time: the full network is 218 M parameters
            _MODEL_CACHE[key] = network_from_state_dict(checkpoint).to(target).eval()
        return _MODEL_CACHE[key]


def check_ct_input(array: np.ndarray, modality: str | None) -> None:
    """VISTA3D is trained on CT only: refuse other modalities, and volumes that are not in Hounsfield units."""
    if modality and modality.upper() != "CT":
        raise Vista3DError(
            "wrong_modality",
            f"VISTA3D segments CT only; this volume is {modality.upper()}. Use segment_region for other modalities",
        )
    minimum = float(np.min(array))
    if modality is None and minimum > HU_AIR_THRESHOLD:
        raise Vista3DError(
            "wrong_modality",
            f"this volume does not look like CT in Hounsfield units (minimum {minimum:.1f}, no air below "
            f"{HU_AIR_THRESHOLD:.0f} HU); VISTA3D segments CT only",
        )


@dataclass
class Vista3DOutput:
    labelmap: ImageVolume  # class ids on the source grid
    label_ids: list[int]  # the classes that were prompted (after subclass expansion)
    device: str


def segment(
    network,
    volume: ImageVolume,
    settings: InferenceSettings,
    label_prompt: Sequence[int] | None = None,
    points_ras: Sequence[Sequence[float]] | None = None,
    point_labels: Sequence[int] | None = None,
) -> Vista3DOutput:
    """Run the bundle's pipeline; class prompts are ids (see :class:`LabelTable`), points are RAS mm."""
    import torch
    from monai.apps.vista3d.transforms import VistaPostTransformd, VistaPreTransformd
    from monai.data import MetaTensor
    from monai.inferers import sliding_window_inference
    from monai.transforms import (
        CastToTyped,
        Compose,
        CropForegroundd,
        Invertd,
        Orientationd,
        ScaleIntensityRanged,
        Spacingd,
    )

    if not label_prompt and not points_ras:
        raise Vista3DError("invalid_argument", "give a label prompt or point prompts")
    if points_ras and label_prompt and len(label_prompt) != 1:
        raise Vista3DError("invalid_argument", "point prompts refine a single class: give one label with points")
    table = label_table()
    device = next(network.parameters()).device
    image = MetaTensor(
        torch.from_numpy(np.ascontiguousarray(volume.array.transpose(2, 1, 0), dtype=np.float32))[None],
        affine=torch.as_tensor(volume.ijk_to_ras, dtype=torch.float64),
    )
    preprocessing = Compose(
        [
            Spacingd("image", pixdim=settings.spacing_mm, mode="bilinear"),
            CropForegroundd("image", source_key="image", margin=settings.crop_margin, allow_smaller=True),
            VistaPreTransformd(
                "image",
                labels_dict={str(label): name for label, name in table.names.items()},
                subclass={str(label): children for label, children in table.subclass.items()},
            ),
            ScaleIntensityRanged(
                "image", a_min=settings.intensity_min, a_max=settings.intensity_max, b_min=0.0, b_max=1.0, clip=True
            ),
            Orientationd("image", axcodes="RAS", labels=(("L", "R"), ("P", "A"), ("I", "S"))),
            CastToTyped("image", dtype=torch.float32),
        ]
    )
    data = {"image": image, "label_prompt": list(label_prompt) if label_prompt else None}
    if points_ras:
        data["point_labels"] = list(point_labels) if point_labels is not None else [1] * len(points_ras)
    data = preprocessing(data)
    prepared = data["image"]
    labels = data["label_prompt"]
    class_vector = torch.as_tensor(labels, device=device).unsqueeze(-1) if labels else None
    point_coords = point_label_tensor = None
    if points_ras:
        voxels = _ras_to_voxels(np.asarray(points_ras, dtype=float), prepared.affine.numpy())
        if np.any(voxels < 0) or np.any(voxels >= np.array(prepared.shape[1:]) - 0.5):
            raise Vista3DError(
                "outside_volume", "a point prompt lies outside the body region VISTA3D analyses in this volume"
            )
        point_coords = torch.as_tensor(voxels[None], dtype=torch.float32, device=device)
        point_label_tensor = torch.as_tensor([data["point_labels"]], device=device)
    prompt_class = class_vector.clone() if class_vector is not None else None
    if class_vector is not None and torch.any(class_vector > table.last_supported):
        class_vector = None  # zero-shot classes go through the point head only, as in the bundle's inferer

    with torch.no_grad(), torch.autocast(device.type, enabled=device.type == "cuda"):
        inputs = prepared[None].to(device)
        common = dict(
            inputs=inputs,
            roi_size=settings.patch_size,
            predictor=network,
            transpose=True,
            point_coords=point_coords,
            point_labels=point_label_tensor,
            class_vector=class_vector,
            prompt_class=prompt_class,
        )
        if point_coords is not None:
            from monai.apps.vista3d.inferer import point_based_window_inferer

            logits = point_based_window_inferer(**common)
        else:
            logits = sliding_window_inference(
                sw_batch_size=1, mode="gaussian", overlap=settings.overlap, sw_device=device, device=device, **common
            )
    prediction = MetaTensor(logits[0].float().clone(), meta=prepared.meta)
    post = {
        "pred": prediction,
        "image": prepared,
        "label_prompt": torch.as_tensor(labels).unsqueeze(-1) if labels else None,
    }
    if point_coords is not None:
        post["points"], post["point_labels"] = point_coords.cpu(), point_label_tensor.cpu()
    post = VistaPostTransformd("pred")(post)
    post = Invertd("pred", transform=preprocessing, orig_keys="image", nearest_interp=True, to_tensor=True)(post)
    labelmap = np.rint(post["pred"][0].cpu().numpy()).astype(np.int16).transpose(2, 1, 0)
    return Vista3DOutput(
        labelmap=ImageVolume(np.ascontiguousarray(labelmap), volume.ijk_to_ras.copy()),
        label_ids=list(labels) if labels else [1],
        device=str(device),
    )


def _ras_to_voxels(points_ras: np.ndarray, affine: np.ndarray) -> np.ndarray:
    homogeneous = np.c_[points_ras, np.ones(len(points_ras))]
    return (np.linalg.inv(affine) @ homogeneous.T).T[:, :3]

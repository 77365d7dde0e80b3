"""Episode set-up (paper App. H.1/H.4): the system preloads the case into the viewer and captures what is
attached after the text prompt -- the scene inventory and the baseline axial, sagittal and coronal views.

All set-up calls are made with ``actor="system"``: they are audited but do not spend the agent's budget.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..providers.messages import ImageInput
from .cases import PATHOLOGY_MODULES, Case
from .episode import Environment, result_images

BASELINE_SIZE = 512


class PreloadError(Exception):
    """The viewer could not open a valid case package: an environment fault, not the agent's."""


@dataclass
class Attachments:
    inventory: dict
    inventory_text: str
    images: list[ImageInput] = field(default_factory=list)


def viewer_kind(module: str) -> str:
    return "pathology" if module in PATHOLOGY_MODULES else "radiology"


def _system_call(env: Environment, name: str, arguments: dict) -> dict:
    result = env.call(name, arguments, actor="system")
    if not result.get("ok"):
        raise PreloadError(f"{name} failed during set-up: {json.dumps(result.get('error'))}")
    return result


def inventory_text(state: dict) -> str:
    """The scene inventory block: one line per loaded volume, in the words of the viewer's own state."""
    lines = ["Scene inventory (loaded volumes):"]
    for volume in state.get("volumes", []):
        dims = "x".join(str(value) for value in volume.get("dimensions", []))
        spacing = "x".join(f"{value:g}" for value in volume.get("spacing_mm", []))
        modality = f", modality {volume['modality']}" if volume.get("modality") else ""
        lines.append(f"- {volume['name']} (id {volume['id']}): {dims} voxels, spacing {spacing} mm{modality}")
    lines.append(f"Active volume: {state.get('active_volume')}")
    offsets = {view: info.get("offset_mm") for view, info in state.get("views", {}).items()}
    lines.append("Current slice offsets (RAS mm): " + ", ".join(f"{v}={o}" for v, o in offsets.items()))
    return "\n".join(lines)


ROUND_OBSERVATION = (
    "Current QuPath direct state summary (software/viewer state from QuPath itself):\n{direct}\n\n"
    "Current QuPath GUI state summary (rule-based GUI/control state, not pathology evidence):\n{gui}\n\n"
    "Current viewer evidence:\n- The current QuPath viewer screenshot is attached in this message.\n"
    "- Use the attached screenshot itself for pathology or image-content reasoning.\n\n"
    "Decide the next best action:\n- either call exactly one tool\n- or provide the final answer"
)


def pathology_observation(env) -> tuple[str, list[ImageInput]]:
    """The App. H.2 per-round observation: both state summaries and the current screenshot."""
    observation = env.observation()
    text = ROUND_OBSERVATION.format(direct=observation["direct_state_summary"], gui=observation["gui_state_summary"])
    return text, result_images(observation, "viewer")


def preload_pathology(env, case: Case) -> Attachments:
    _system_call(env, "load_case", {"case_path": str(case.path(case.slide or case.open_paths[0]))})
    _system_call(env, "set_image_type", {"image_type": "BRIGHTFIELD_H_E"})
    text, images = pathology_observation(env)
    return Attachments({}, text, images)


def preload(env, case: Case) -> Attachments:
    if case.module in PATHOLOGY_MODULES:
        return preload_pathology(env, case)
    return preload_radiology(env, case)


def preload_radiology(env: Environment, case: Case) -> Attachments:
    for relative in case.open_paths:
        _system_call(env, "open_case", {"dicom_dir": str(case.path(relative)), "size": 64})
    views = _system_call(env, "observe", {"size": BASELINE_SIZE})
    state = _system_call(env, "get_viewer_state", {})["data"]
    return Attachments(state, inventory_text(state), result_images(views, "baseline"))

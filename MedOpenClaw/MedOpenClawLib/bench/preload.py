"""Episode set-up (MedFlow-Bench App. H.1/H.4): the system preloads the case into the viewer and captures what is
attached after the text prompt -- the scene inventory and the baseline axial, sagittal and coronal views
(radiology), or the QuPath state summaries and screenshot (pathology) -- and fills the module's prompt.

Before anything is opened, the case's files are verified against the manifest written by ``bench prepare``.
All set-up calls are made with ``actor="system"``: they are audited but do not spend the agent's budget.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..providers.messages import ImageInput
from .cases import Case
from .episode import Environment, EpisodePrompt, result_images
from .integrity import verify_case_files
from .modules import PATHOLOGY, ModuleSpec
from .prompts import build_prompt, pathology_round_text

BASELINE_SIZE = 512


class PreloadError(Exception):
    """The viewer could not open a valid case package: an environment fault, not the agent's."""


@dataclass
class Attachments:
    inventory: dict
    inventory_text: str
    images: list[ImageInput] = field(default_factory=list)
    state_summaries: tuple[str, str] | None = None  # pathology: (direct, GUI) state summaries of App. H.2


def _system_call(env: Environment, name: str, arguments: dict) -> dict:
    result = env.call(name, arguments, actor="system")
    if not result.get("ok"):
        raise PreloadError(f"{name} failed during set-up: {json.dumps(result.get('error'))}")
    return result


def inventory_text(state: dict, loading_notes: list[str] = ()) -> str:
    """The scene inventory block: one line per loaded volume, in the words of the viewer's own state, and the
    viewer's loading notes (a series split or resampled, a file left out) when there are any."""
    lines = ["Scene inventory (loaded volumes):"]
    for volume in state.get("volumes", []):
        dims = "x".join(str(value) for value in volume.get("dimensions", []))
        spacing = "x".join(f"{value:g}" for value in volume.get("spacing_mm", []))
        modality = f", modality {volume['modality']}" if volume.get("modality") else ""
        lines.append(f"- {volume['name']} (id {volume['id']}): {dims} voxels, spacing {spacing} mm{modality}")
    lines.append(f"Active volume: {state.get('active_volume')}")
    offsets = {view: info.get("offset_mm") for view, info in state.get("views", {}).items()}
    lines.append("Current slice offsets (RAS mm): " + ", ".join(f"{v}={o}" for v, o in offsets.items()))
    lines += ["Loading notes:", *[f"- {note}" for note in loading_notes]] if loading_notes else []
    return "\n".join(lines)


def pathology_observation(env) -> tuple[str, str, list[ImageInput]]:
    """The viewer's current App. H.2 state summaries (direct, GUI) and screenshot."""
    observation = env.observation()
    return observation["direct_state_summary"], observation["gui_state_summary"], result_images(observation, "viewer")


def preload_pathology(env, case: Case) -> Attachments:
    _system_call(env, "load_case", {"case_path": str(case.path(case.slide or case.open_paths[0]))})
    _system_call(env, "set_image_type", {"image_type": "BRIGHTFIELD_H_E"})
    direct, gui, images = pathology_observation(env)
    return Attachments({}, "", images, state_summaries=(direct, gui))


def preload(env, spec: ModuleSpec, case: Case) -> Attachments:
    """Open the case for an episode: its files are first checked against the package manifest
    (CaseIntegrityError -> the episode is INVALID, never scored against ground truth of other bytes)."""
    verify_case_files(case)
    if spec.application == PATHOLOGY:
        return preload_pathology(env, case)
    return preload_radiology(env, case)


def preload_radiology(env: Environment, case: Case) -> Attachments:
    notes: list[str] = []
    for index, relative in enumerate(case.open_paths):  # one case: later paths add to the first one's volumes
        opened = _system_call(env, "open_case", {"dicom_dir": str(case.path(relative)), "size": 64,
                                                 "keep_loaded": index > 0})
        notes += [item["message"] for item in (opened.get("data") or {}).get("warnings", [])]
    views = _system_call(env, "observe", {"size": BASELINE_SIZE})
    state = _system_call(env, "get_viewer_state", {})["data"]
    return Attachments(state, inventory_text(state, notes), result_images(views, "baseline"))


# The pathology task text points at the state summaries that follow it in every round message (App. H.2).
PATHOLOGY_STATE_POINTER = "See the direct and GUI state summaries below and the attached screenshot."


def pathology_round(case: Case, task: str, rounds_used: int, max_rounds: int, direct: str, gui: str) -> str:
    """One App. H.2 round message: the task, the case summary (with the budget used) and both state summaries."""
    summary = (f"Case alias: {case.brief.get('case_alias', case.case_id)}\n"
               f"Tool-calling rounds used: {rounds_used} of {max_rounds}")
    return pathology_round_text(task, summary, direct, gui)


def module_prompt(spec: ModuleSpec, case: Case, attachments: Attachments, max_rounds: int) -> EpisodePrompt:
    """The module's App. H template with the scene inventory (or the QuPath state) and the images attached."""
    if spec.application == PATHOLOGY:
        system, task = build_prompt(spec, case, max_rounds, scene_inventory=PATHOLOGY_STATE_POINTER)
        direct, gui = attachments.state_summaries or ("", "")
        return EpisodePrompt(system, pathology_round(case, task, 0, max_rounds, direct, gui), attachments.images)
    system, task = build_prompt(spec, case, max_rounds, scene_inventory=attachments.inventory_text)
    return EpisodePrompt(system, task, attachments.images)


# The conversation policy sends the task once: later round messages point back at it (App. H.4: per round only
# the state summaries and the current screenshot are new).
TASK_SENT_ONCE = "(unchanged: as stated in the first message)"


class PathologyRounds:
    """The per-round observation of a pathology episode: the round message with the current state, and the task
    text again only when ``repeat_task`` (App. H.2 verbatim; the ``--image-history all`` policy)."""

    def __init__(self, spec: ModuleSpec, case: Case, max_rounds: int, repeat_task: bool = True):
        self.case = case
        self.max_rounds = max_rounds
        self.task = build_prompt(spec, case, max_rounds, scene_inventory=PATHOLOGY_STATE_POINTER)[1] \
            if repeat_task else TASK_SENT_ONCE

    def __call__(self, env, rounds_used: int) -> tuple[str, list[ImageInput]]:
        direct, gui, images = pathology_observation(env)
        return pathology_round(self.case, self.task, rounds_used, self.max_rounds, direct, gui), images


# ------------------------------------------------------------------------------------------ Track C (App. C.2)
MONTAGE_SLICES = 16  # a 4 x 4 grid of evenly spaced axial slices per series
TRACK_C_NOTE = (
    "Track C (2D slice montage): no viewer tools are available in this run. Each attached image is a static "
    "montage of {slices} evenly spaced axial slices of one loaded series (series name in each tile's top-left "
    "corner, the slice's canonical S offset in mm in its bottom-left corner). Answer in this single turn, in "
    "exactly the required format."
)


def slice_montage(env: Environment, volume_name: str, slices: int = MONTAGE_SLICES) -> ImageInput:
    """One series as a static contact sheet of evenly spaced axial slices, rendered by the viewer itself
    (``scroll`` in cine mode, as the system), so every tile carries the same overlay as an interactive view."""
    _system_call(env, "select_volume", {"volume_name": volume_name, "view": "axial", "size": 64})
    extent = _system_call(env, "get_slice_offset_range", {"view": "axial"})["data"]
    step = (extent["max_mm"] - extent["min_mm"]) / (slices + 1)  # interior slices: the edges are empty
    _system_call(env, "set_slice_offset", {"view": "axial", "offset": extent["min_mm"], "size": 64})
    result = _system_call(env, "scroll", {"view": "axial", "direction": "up", "num_slices": slices, "step": step,
                                          "output": "cine", "size": 256})
    (image,) = result_images(result, f"montage:{volume_name}")
    return image


def montage_prompt(spec: ModuleSpec, case: Case, env: Environment, attachments: Attachments) -> EpisodePrompt:
    """Track C input: the module prompt with the scene inventory, one slice montage per loaded series instead of
    the baseline views, and no tools."""
    volumes = [volume["name"] for volume in attachments.inventory.get("volumes", [])]
    images = [slice_montage(env, name) for name in volumes]
    system, task = build_prompt(spec, case, scene_inventory=attachments.inventory_text, tools=False)
    return EpisodePrompt(system, task + "\n\n" + TRACK_C_NOTE.format(slices=MONTAGE_SLICES), images)

"""An episode's audit trace read once into what the rules need: the calls, what the agent was shown, the state.

Every rule reads the trace through this module, so a change of the record format touches one place:

- :meth:`Timeline.state_after` is the one accessor of a record's viewer-state snapshot (the trace may come to
  carry deltas instead of whole snapshots; only this method then changes);
- *shown images* are the images the agent received: those of its own successful calls, plus those of the system
  calls before the prompt whose checksums the prompt lists (the baseline views; without checksums in the trace,
  the images of the last system call that returned any). A montage (``scroll`` in cine mode) shows every slice it
  lists in ``offsets_mm``;
- *viewed fields* (whole-slide images) are the level-0 fields the viewer showed after each agent call (the
  pathology protocol attaches the current screenshot every round), the field before the first call (the prompt's
  screenshot) and every captured field.

Nothing here trusts the trace's shape: a missing or mistyped key reads as absent, never as an exception.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ..core.arguments import canonical_arguments
from ..core.audit import StateDeltaError, StateReplay
from ..core.result import ActionError

# canonical RAS axis index per view (axial = S, sagittal = R, coronal = A), as in viewer.geometry.CANONICAL_AXIS
AXIS_INDEX = {"axial": 2, "sagittal": 0, "coronal": 1}
SLICE_VIEWS = tuple(AXIS_INDEX)


def as_dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def as_list(value) -> list:
    return value if isinstance(value, list) else []


def text(value) -> str | None:
    """A string from a record, or None (a list where a name belongs must not reach a set or dict look-up)."""
    return value if isinstance(value, str) else None


def number(value) -> float | None:
    """A finite float, or None (booleans and strings are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def point(value, size: int) -> list[float] | None:
    """A list of ``size`` finite numbers, or None."""
    values = [number(item) for item in as_list(value)]
    return values if len(values) == size and all(item is not None for item in values) else None


@dataclass
class Call:
    """One action record."""

    seq: int
    actor: str
    action: str
    arguments: dict
    ok: bool
    data: dict
    images: list[dict]
    artifacts: list[dict]
    record: dict = field(repr=False)

    @property
    def by_agent(self) -> bool:
        return self.actor == "agent"


@dataclass
class Shown:
    """One slice image the agent received (a montage contributes one entry per tile offset)."""

    seq: int
    view: str
    offset_mm: float
    step_mm: float | None  # slice thickness of the image (None: unknown)
    geometry: dict | None  # the image's geometry record (None for montage tiles)
    background: str | None
    foreground: str | None
    path: str | None = None


@dataclass
class ViewedField:
    """A whole-slide field the agent saw: level-0 ``[x0, y0, x1, y1]`` at ``downsample``."""

    seq: int
    field: list[float]
    downsample: float | None
    overview: bool  # the whole slide at the coarsest zoom (nothing in it is localised by seeing it)


class Timeline:
    def __init__(self, records: Iterable):
        """``records``: a list, or an iterator read once (``audit.iter_trace``): only the action records and the
        few others the rules read are kept, never the model turns and receipts of a long trace."""
        self.header: dict = {}
        self.prompt: dict | None = None
        self.prompt_seq: int | None = None
        self.final_text: str | None = None
        self.final_seq: int | None = None  # the record holding the final answer
        self.calls: list[Call] = []
        # traces carry state deltas (see ..audit): rebuilt once, keyed by record; a delta that does not apply
        # leaves the whole trace without states
        replay, states = StateReplay(), {}
        last_model = None
        for record in records if isinstance(records, (list, tuple, Iterator)) else ():
            if not isinstance(record, dict):
                continue
            kind = record.get("kind")
            payload = as_dict(record.get("payload"))
            if kind == "session_start" and not self.header:
                self.header = payload
            elif kind == "episode_prompt" and self.prompt is None:
                self.prompt, self.prompt_seq = payload, self.seq(record)
            elif kind == "model_output" and isinstance(payload.get("text"), str):
                last_model = (payload["text"], self.seq(record))
            elif kind == "episode_end" and isinstance(payload.get("final_text"), str):
                self.final_text = payload["final_text"]
            elif kind == "action":
                self.calls.append(self._call(record))
                if states is not None:
                    try:
                        states[id(record)] = replay.after(record)
                    except StateDeltaError:
                        states = None
        self._states = states or {}
        if last_model is not None:  # the answer is the last model turn; the end record repeats it
            self.final_seq = last_model[1]
            if self.final_text is None:
                self.final_text = last_model[0]
        self.shown = self._shown()
        self.viewed_fields = self._viewed_fields()

    # ----------------------------------------------------------------------------------------------- records
    @staticmethod
    def seq(record: dict) -> int:
        value = record.get("seq")
        return value if isinstance(value, int) and not isinstance(value, bool) else -1

    def _call(self, record: dict) -> Call:
        result = as_dict(record.get("result"))
        action = str(record.get("action") or "")
        arguments = as_dict(record.get("arguments"))
        try:  # a trace written before an argument was renamed: read it under the current names
            arguments = canonical_arguments(action, arguments)
        except ActionError:
            pass  # both names (the registry refused the call): the record is read as written
        return Call(
            seq=self.seq(record), actor=str(record.get("actor") or ""), action=action,
            arguments=arguments, ok=record.get("status") == "ok",
            data=as_dict(result.get("data")), images=[as_dict(image) for image in as_list(result.get("images"))],
            artifacts=[as_dict(item) for item in as_list(record.get("artifacts"))], record=record,
        )

    def state_after(self, call: Call) -> dict:
        """The viewer state after ``call`` (the one accessor of trace state), rebuilt from the trace's deltas."""
        return as_dict(self._states.get(id(call.record)))

    @property
    def module(self) -> str | None:
        value = self.header.get("module")
        return value if isinstance(value, str) else None

    @property
    def offered(self) -> set[str]:
        """Tools the agent was offered (from the prompt record; every agent-called action without one)."""
        tools = as_list(as_dict(self.prompt).get("tools"))
        if tools:
            return {str(name) for name in tools}
        return {call.action for call in self.agent_calls}

    @property
    def agent_calls(self) -> list[Call]:
        return [call for call in self.calls if call.by_agent]

    def successful(self, *actions: str) -> list[Call]:
        """The agent's successful calls of ``actions``, in trace order."""
        return [call for call in self.agent_calls if call.ok and call.action in actions]

    # ------------------------------------------------------------------------------------------ volumes
    def volume_names(self, call: Call) -> dict[str, str]:
        """Node id -> volume name in the state recorded with ``call``."""
        state = self.state_after(call)
        names = {}
        for item in as_list(state.get("volumes")) + as_list(as_dict(state.get("artifacts")).get("volumes")):
            item = as_dict(item)
            if isinstance(item.get("id"), str) and isinstance(item.get("name"), str):
                names[item["id"]] = item["name"]
        return names

    def artifacts(self, call: Call) -> dict:
        """The artifact graph (volumes with their space, transforms, segmentations) recorded with ``call``."""
        return as_dict(self.state_after(call).get("artifacts"))

    def displayed_layers(self, call: Call) -> set[str]:
        """Names of the volumes any slice view showed (background or foreground) when ``call`` was recorded."""
        layers = set()
        for view in as_dict(self.state_after(call).get("views")).values():
            for key in ("background", "foreground"):
                name = as_dict(view).get(key)
                if isinstance(name, str):
                    layers.add(name)
        return layers

    # -------------------------------------------------------------------------------------------- shown
    def _prompt_checksums(self) -> set[str]:
        return {str(as_dict(image).get("sha256")) for image in as_list(as_dict(self.prompt).get("images"))}

    def _received_calls(self) -> list[Call]:
        before_prompt = [call for call in self.calls if not call.by_agent and call.ok and call.images
                         and (self.prompt_seq is None or call.seq < self.prompt_seq)]
        checksums = self._prompt_checksums()
        baseline = [call for call in before_prompt
                    if any(str(item.get("sha256")) in checksums for item in call.artifacts)]
        if not baseline and before_prompt and not any(call.artifacts for call in before_prompt):
            baseline = before_prompt[-1:]
        return sorted(baseline + [call for call in self.agent_calls if call.ok and call.images],
                      key=lambda call: call.seq)

    def _shown(self) -> list[Shown]:
        shown = []
        for call in self._received_calls():
            views = as_dict(self.state_after(call).get("views"))
            for image in call.images:
                view = text(image.get("view"))
                if view == "montage":
                    shown.extend(self._montage(call, views))
                    continue
                offset = number(image.get("slice_offset_mm"))
                if view not in AXIS_INDEX or offset is None:
                    continue
                geometry = as_dict(image.get("geometry")) or None
                thickness = point(as_dict(geometry).get("field_of_view_mm"), 3)
                layers = as_dict(views.get(view))
                shown.append(Shown(call.seq, view, offset, thickness[2] if thickness else None, geometry,
                                   text(layers.get("background")), text(layers.get("foreground")),
                                   text(image.get("path"))))
        return shown

    def _montage(self, call: Call, views: dict) -> list[Shown]:
        view = text(call.arguments.get("view"))
        if view not in AXIS_INDEX:
            return []
        layers = as_dict(views.get(view))
        background = text(layers.get("background"))
        step = self._spacing(call, background, view)
        return [Shown(call.seq, view, offset, step, None, background, text(layers.get("foreground")))
                for offset in (number(item) for item in as_list(call.data.get("offsets_mm"))) if offset is not None]

    def _spacing(self, call: Call, volume: str | None, view: str) -> float | None:
        for item in as_list(self.state_after(call).get("volumes")):
            item = as_dict(item)
            spacing = point(item.get("spacing_mm"), 3)
            if item.get("name") == volume and spacing:
                return spacing[AXIS_INDEX[view]]
        return None

    # --------------------------------------------------------------------------------------- pathology
    def _viewed_fields(self) -> list[ViewedField]:
        fields = []
        before = [call for call in self.calls if not call.by_agent and call.ok
                  and (self.prompt_seq is None or call.seq < self.prompt_seq)]
        for call in before[-1:] + self.agent_calls:
            view = as_dict(as_dict(self.state_after(call).get("viewer")).get("view"))
            found = self._field(call.seq, view)
            if found is not None:
                fields.append(found)
            if call.action == "capture_viewer" and call.ok:
                found = self._field(call.seq, as_dict(call.data.get("capture")), view.get("max_downsample"))
                if found is not None:
                    fields.append(found)
        return fields

    @staticmethod
    def _field(seq: int, view: dict, max_downsample=None) -> ViewedField | None:
        box = point(view.get("field"), 4)
        if box is None:
            return None
        downsample = number(view.get("downsample"))
        coarsest = number(view.get("max_downsample", max_downsample))
        overview = downsample is not None and coarsest is not None and downsample >= coarsest - 1e-9
        return ViewedField(seq, box, downsample, overview)

"""An episode's audit trace read once, as a stream, into what the rules need: each call as it comes, what the
agent was shown, the state.

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

The trace is read once, as a stream, and what is kept does not grow with the trace (``medopenclaw trace audit`` of
a long trace): no record and no call is kept; each call, reduced to its arguments, the keys of its result data the
rules read (:data:`DATA_KEYS`) and, for the actions whose state a rule reads (:data:`STATE_READ_BY`), its viewer
state, is handed to the rules' checkers (``on_call``) and dropped. Images are reduced to :class:`Shown` entries as
they are read, one per distinct image (view, offset, geometry, layers) with the calls that showed it, and viewed
fields likewise; :mod:`.bounded` states the caps on those summaries.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from ..core.arguments import canonical_arguments
from ..core.audit import StateDeltaError, StateReplay
from ..core.result import ActionError
from .bounded import BASELINE_KEPT, Distinct, Seqs

# canonical RAS axis index per view (axial = S, sagittal = R, coronal = A), as in viewer.geometry.CANONICAL_AXIS
AXIS_INDEX = {"axial": 2, "sagittal": 0, "coronal": 1}
SLICE_VIEWS = tuple(AXIS_INDEX)
# the keys of a call's result data the rules read (detectors, milestones, provenance, and the montage and capture
# readers here); a rule reading another key fails loudly (:class:`KeptData`) rather than seeing it absent
DATA_KEYS = frozenset({"background", "capture", "center_ras", "downsample", "end_ras", "foreground", "inputs",
                       "length_mm", "offsets_mm", "outputs", "ras", "segments", "start_ras", "statistics",
                       "transform_id", "volume_name", "warnings", "x", "y"})
# the actions whose recorded viewer state a rule reads (detectors.Volumes, Timeline.displayed_layers)
STATE_READ_BY = frozenset({"register_volumes", "apply_transform", "resample_volume", "fusion",
                           "record_key_slices", "record_point"})


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


class KeptData(dict):
    """A call's result data reduced to :data:`DATA_KEYS`: reading any other key is a rule out of step with
    :data:`DATA_KEYS` (an error in this package, raised), never a value silently absent."""

    def get(self, key, default=None):
        self._declared(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self._declared(key)
        return super().__getitem__(key)

    @staticmethod
    def _declared(key) -> None:
        if key not in DATA_KEYS:
            raise KeyError(f"the trace audit keeps no result key {key!r}: add it to timeline.DATA_KEYS")


@dataclass(slots=True)
class Call:
    """One action record, reduced to what the rules read."""

    seq: int
    actor: str
    action: str
    arguments: dict
    ok: bool
    data: KeptData
    state: dict | None = field(default=None, repr=False)  # kept for STATE_READ_BY actions only

    @property
    def by_agent(self) -> bool:
        return self.actor == "agent"


@dataclass(slots=True)
class Shown:
    """One distinct slice image the agent received (a montage contributes one entry per tile offset), with the
    calls that showed it."""

    seqs: Seqs
    view: str
    offset_mm: float
    step_mm: float | None  # slice thickness of the image (None: unknown)
    geometry: dict | None  # the image's geometry record (None for montage tiles)
    background: str | None
    foreground: str | None

    @property
    def seq(self) -> int:
        """The first call that showed it."""
        return self.seqs.first


@dataclass(slots=True)
class ViewedField:
    """A whole-slide field the agent saw, level-0 ``[x0, y0, x1, y1]``, with the calls after which it was shown."""

    seqs: Seqs
    field: list[float]
    overview: bool  # the whole slide at the coarsest zoom (nothing in it is localised by seeing it)


class Timeline:
    def __init__(self, records: Iterable, on_call: Callable[[Timeline, Call], None] | None = None):
        """``records``: a list, or an iterator read once (``audit.iter_trace``); ``on_call`` is handed each action
        record as a :class:`Call`, in trace order, with this timeline as read so far."""
        self.header: dict = {}
        self.prompt: dict | None = None
        self.prompt_seq: int | None = None
        self.final_text: str | None = None
        self.final_seq: int | None = None  # the record holding the final answer
        self.final_views: dict = {}  # the views of the last action record whose state has any
        self.final_images: dict[str, str] = {}  # view -> path of the last image of it the agent received
        self.agent_actions = Distinct("actions the agent called")
        # traces carry state deltas (see ..audit), replayed as the records stream by; a delta that does not
        # apply leaves the rest of the trace without states (those replayed before it stand)
        replay: StateReplay | None = StateReplay()
        self._shown = Distinct("shown images")
        self._fields_seen = Distinct("viewed whole-slide fields")
        # the last system calls with images before the prompt: (seq, artifact checksums, their images)
        self._baseline: deque[tuple[int, list[str], list[tuple[Shown, str | None]]]] = deque(maxlen=BASELINE_KEPT)
        self._baseline_dropped = 0  # the earlier ones the deque let go
        self._baseline_checksums = False  # whether any of them (kept or not) listed checksums
        self._setup_fields: list[ViewedField] = []  # the fields of the last system call before the prompt
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
                state = None
                if replay is not None:
                    try:
                        state = replay.after(record)
                    except StateDeltaError:
                        replay = None
                call = self._read_call(record, as_dict(state))
                if on_call is not None:
                    on_call(self, call)
        if last_model is not None:  # the answer is the last model turn; the end record repeats it
            self.final_seq = last_model[1]
            if self.final_text is None:
                self.final_text = last_model[0]
        self.shown = self._merged_shown()
        self.viewed_fields = self._setup_fields + list(self._fields_seen)

    # ----------------------------------------------------------------------------------------------- records
    @staticmethod
    def seq(record: dict) -> int:
        value = record.get("seq")
        return value if isinstance(value, int) and not isinstance(value, bool) else -1

    def _read_call(self, record: dict, state: dict) -> Call:
        """One action record as a call; what the evidence rules read of it (its shown images, its viewed fields)
        summarised."""
        result = as_dict(record.get("result"))
        action = str(record.get("action") or "")
        arguments = as_dict(record.get("arguments"))
        try:  # a trace written before an argument was renamed: read it under the current names
            arguments = canonical_arguments(action, arguments)
        except ActionError:
            pass  # both names (the registry refused the call): the record is read as written
        data = as_dict(result.get("data"))
        call = Call(seq=self.seq(record), actor=str(record.get("actor") or ""), action=action, arguments=arguments,
                    ok=record.get("status") == "ok", data=KeptData({key: data[key] for key in DATA_KEYS & data.keys()}),
                    state=state if action in STATE_READ_BY else None)
        if call.by_agent:
            self.agent_actions.add(action, action)
        views = as_dict(state.get("views"))
        if views:
            self.final_views = views
        images = [as_dict(image) for image in as_list(result.get("images"))]
        before_prompt = self.prompt is None
        if call.by_agent and call.ok and images:
            for shown, path in self._images(call, images, state):
                self._show(shown, path)
        elif before_prompt and not call.by_agent and call.ok and images:
            checksums = [str(as_dict(item).get("sha256")) for item in as_list(record.get("artifacts"))]
            self._baseline_dropped += len(self._baseline) == self._baseline.maxlen
            self._baseline.append((call.seq, checksums, self._images(call, images, state)))
            self._baseline_checksums = self._baseline_checksums or bool(checksums)
        if call.by_agent:
            for found in self._fields(call, state):
                seen = self._fields_seen.add((tuple(found.field), found.overview), found)
                if seen is not None and seen is not found:
                    seen.seqs.add(call.seq)
        elif before_prompt and call.ok:
            self._setup_fields = self._fields(call, state)
        return call

    def state_after(self, call: Call) -> dict:
        """The viewer state after ``call`` (the one accessor of trace state), rebuilt from the trace's deltas:
        kept for the :data:`STATE_READ_BY` actions only, and reading another's is an error in this package."""
        if call.action not in STATE_READ_BY:
            raise LookupError(f"the trace audit keeps no viewer state for {call.action}: add it to STATE_READ_BY")
        return as_dict(call.state)

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
        return set(self.agent_actions)

    @property
    def shown_summary(self) -> Distinct:
        return self._shown

    @property
    def fields_summary(self) -> Distinct:
        return self._fields_seen

    def limits(self) -> dict:
        """What the summaries left out (:mod:`.bounded`): {} for an episode within the caps."""
        left = {**self._shown.limit(), **self._fields_seen.limit(), **self.agent_actions.limit()}
        if self._baseline_dropped:
            left["system calls with images before the prompt"] = {"kept": BASELINE_KEPT,
                                                                  "left_out": self._baseline_dropped}
        return left

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
    def _images(self, call: Call, images: list[dict], state: dict) -> list[tuple[Shown, str | None]]:
        """(shown image, its file) of each image a call returned, read with the state recorded with it."""
        views = as_dict(state.get("views"))
        shown = []
        for image in images:
            view = text(image.get("view"))
            if view == "montage":
                shown.extend((tile, None) for tile in self._montage(call, views, state))
                continue
            offset = number(image.get("slice_offset_mm"))
            if view not in AXIS_INDEX or offset is None:
                continue
            geometry = as_dict(image.get("geometry")) or None
            thickness = point(as_dict(geometry).get("field_of_view_mm"), 3)
            layers = as_dict(views.get(view))
            shown.append((Shown(Seqs((call.seq,)), view, offset, thickness[2] if thickness else None, geometry,
                                text(layers.get("background")), text(layers.get("foreground"))),
                          text(image.get("path"))))
        return shown

    def _show(self, shown: Shown, path: str | None) -> None:
        """Add a received image: a new entry, or the call's number on the entry of the same image."""
        geometry = json.dumps(shown.geometry, sort_keys=True, default=str) if shown.geometry else None
        key = (shown.view, shown.offset_mm, shown.step_mm, geometry, shown.background, shown.foreground)
        known = self._shown.add(key, shown)
        if known is not None and known is not shown and known.seqs.last != shown.seq:
            known.seqs.add(shown.seq)
        if path is not None:
            self.final_images[shown.view] = path

    def _merged_shown(self) -> list[Shown]:
        """The shown images, the baseline views before the prompt among them: those of the system calls before
        the prompt whose checksums the prompt lists (without checksums in the trace, the last such call's)."""
        before = [item for item in self._baseline if self.prompt_seq is None or item[0] < self.prompt_seq]
        checksums = {str(as_dict(image).get("sha256")) for image in as_list(as_dict(self.prompt).get("images"))}
        baseline = [item for item in before if any(checksum in checksums for checksum in item[1])]
        if not baseline and before and not self._baseline_checksums:
            baseline = before[-1:]
        agent, agent_images = self._shown, self.final_images
        self._shown, self.final_images = Distinct(agent.what, dropped=agent.dropped), {}
        for _, _, images in baseline:  # received before the agent's calls: their entries come first
            for shown, path in images:
                self._show(shown, path)
        for key, shown in agent.items.items():
            known = self._shown.add(key, shown)
            if known is not None and known is not shown:
                known.seqs.extend(shown.seqs)
        self.final_images.update(agent_images)
        merged = sorted(self._shown, key=lambda shown: shown.seq)
        self._baseline.clear()
        return merged

    def _montage(self, call: Call, views: dict, state: dict) -> list[Shown]:
        view = text(call.arguments.get("view"))
        if view not in AXIS_INDEX:
            return []
        layers = as_dict(views.get(view))
        background = text(layers.get("background"))
        step = self._spacing(state, background, view)
        return [Shown(Seqs((call.seq,)), view, offset, step, None, background, text(layers.get("foreground")))
                for offset in (number(item) for item in as_list(call.data.get("offsets_mm"))) if offset is not None]

    @staticmethod
    def _spacing(state: dict, volume: str | None, view: str) -> float | None:
        for item in as_list(state.get("volumes")):
            item = as_dict(item)
            spacing = point(item.get("spacing_mm"), 3)
            if item.get("name") == volume and spacing:
                return spacing[AXIS_INDEX[view]]
        return None

    # --------------------------------------------------------------------------------------- pathology
    def _fields(self, call: Call, state: dict) -> list[ViewedField]:
        """The whole-slide fields shown after ``call``: the viewer's, and the captured one."""
        fields = []
        view = as_dict(as_dict(state.get("viewer")).get("view"))
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
        return ViewedField(Seqs((seq,)), box, overview)

"""Constructed audit traces for the trace-audit rule tests: records in the shape the registry and the episode
loop write (see a real trace under an episode folder), built call by call."""

from __future__ import annotations

from MedOpenClawLib.bench.modules import known
from MedOpenClawLib.trace_audit import AuditReport, audit_records

VIEW_PLANES = {  # slice_to_ras rotation columns (in-plane x, in-plane y, normal) of the standard views
    "axial": ((-1, 0, 0), (0, 1, 0), (0, 0, 1)),
    "sagittal": ((0, 0, -1), (-1, 0, 0), (0, 1, 0)),
    "coronal": ((-1, 0, 0), (0, 0, 1), (0, 1, 0)),
}
AXIS = {"axial": 2, "sagittal": 0, "coronal": 1}


def audit_trace(records: list, module: str | None = None, parsed: dict | None = None) -> AuditReport:
    """The audit as the bench's callers run it: the spec of ``module`` (else of the trace header's) handed in."""
    return audit_records(records, parsed=parsed, lookup=lambda header: known(module or header))


def geometry(view: str, offset: float, size: int = 100, fov: float = 200.0, thickness: float = 2.0) -> dict:
    """A slice image geometry: ``size`` pixels over ``fov`` mm centred on the RAS origin, plane at ``offset``."""
    x_axis, y_axis, normal = (list(map(float, column)) for column in VIEW_PLANES[view])
    origin = [0.0, 0.0, 0.0]
    origin[AXIS[view]] = offset
    pixel = fov / size
    xy_to_ras = [[x_axis[row] * pixel, y_axis[row] * pixel, normal[row] * thickness,
                  origin[row] - (x_axis[row] + y_axis[row]) * pixel * (size - 1) / 2.0] for row in range(3)]
    slice_to_ras = [[x_axis[row], y_axis[row], normal[row], origin[row]] for row in range(3)]
    return {"view": view, "width": size, "height": size, "xy_to_ras": xy_to_ras + [[0, 0, 0, 1]],
            "slice_to_ras": slice_to_ras + [[0, 0, 0, 1]], "field_of_view_mm": [fov, fov, thickness],
            "slice_offset_mm": offset}


def image(view: str, offset: float, **kwargs) -> dict:
    return {"view": view, "width": 100, "height": 100, "slice_offset_mm": offset, "image_id": None,
            "geometry": geometry(view, offset, **kwargs)}


class TraceBuilder:
    """Appends records; ``state`` is the viewer state every later action record carries (mutate it freely)."""

    def __init__(self, module: str = "ucsf-pdgm", track: str = "B", tools: tuple[str, ...] | None = None,
                 volumes: tuple[str, ...] = ("T1c", "FLAIR")):
        self.records: list[dict] = []
        self.state: dict = {
            "active_volume": volumes[0],
            "volumes": [{"id": f"vol{index + 1}", "name": name, "spacing_mm": [2.0, 2.0, 2.0]}
                        for index, name in enumerate(volumes)],
            "views": {view: {"background": volumes[0], "foreground": None, "offset_mm": 0.0}
                      for view in AXIS},
            "artifacts": {"volumes": [{"id": f"vol{index + 1}", "name": name, "space": "grid:a"}
                                      for index, name in enumerate(volumes)], "transforms": [],
                          "segmentations": []},
        }
        self._add({"kind": "session_start", "actor": "system", "payload": {"module": module, "track": track}})
        self._add({"kind": "session_config", "actor": "system", "payload": {"track": track}})
        self.tools = tools

    def _add(self, record: dict) -> dict:
        record["seq"] = len(self.records)
        self.records.append(record)
        return record

    def prompt(self, images: list[dict] = ()) -> TraceBuilder:
        """The system's baseline observe (its images become the prompt's) and the prompt record."""
        if images:
            artifacts = [{"kind": "image", "path": f"b{index}.png", "sha256": f"base{index}"}
                         for index in range(len(images))]
            self._action("system", "observe", {}, {"data": {}, "images": list(images)}, artifacts=artifacts)
        tools = list(self.tools) if self.tools is not None else []
        self._add({"kind": "episode_prompt", "actor": "system",
                   "payload": {"images": [{"sha256": f"base{index}"} for index in range(len(images))],
                               "tools": tools}})
        return self

    def _action(self, actor: str, action: str, arguments: dict, result: dict, ok: bool = True,
                artifacts: list | None = None) -> dict:
        import copy

        return self._add({"kind": "action", "actor": actor, "action": action, "arguments": arguments,
                          "status": "ok" if ok else "error", "error": None if ok else {"code": "x", "message": "x"},
                          "result": result, "state": copy.deepcopy(self.state), "artifacts": artifacts or []})

    def call(self, action: str, arguments: dict | None = None, data: dict | None = None,
             images: list[dict] = (), ok: bool = True) -> int:
        """An agent call; returns its seq."""
        return self._action("agent", action, arguments or {}, {"data": data or {}, "images": list(images)}, ok)["seq"]

    def answer(self, text: str) -> TraceBuilder:
        self._add({"kind": "model_output", "actor": "system", "payload": {"text": text, "tool_calls": []}})
        self._add({"kind": "episode_end", "actor": "system", "payload": {"final_text": text}})
        return self

    # ------------------------------------------------------------------------ scene helpers for Track B rules
    def volume_id(self, name: str) -> str:
        return next(item["id"] for item in self.state["volumes"] if item["name"] == name)

    def add_volume(self, name: str, **graph) -> str:
        node = f"vol{len(self.state['volumes']) + 1}"
        self.state["volumes"].append({"id": node, "name": name, "spacing_mm": [2.0, 2.0, 2.0]})
        self.state["artifacts"]["volumes"].append({"id": node, "name": name, "space": "grid:a", **graph})
        return node

    def graph_volume(self, name: str) -> dict:
        return next(item for item in self.state["artifacts"]["volumes"] if item["name"] == name)

    def register(self, fixed: str, moving: str, transform: str | None = None) -> str:
        """A successful register_volumes; returns the transform id."""
        node = f"tf{len(self.state['artifacts']['transforms']) + 1}"
        name = transform or f"{moving} to {fixed}"
        self.state["artifacts"]["transforms"].append(
            {"id": node, "name": name, "fixed": self.volume_id(fixed), "moving": self.volume_id(moving)})
        self.call("register_volumes", {"fixed_volume_ref": fixed, "moving_volume_ref": moving},
                  {"inputs": {"fixed_volume_id": self.volume_id(fixed), "moving_volume_id": self.volume_id(moving)},
                   "outputs": {"transform_id": node, "transform_name": name}, "transform_id": node})
        return node

    def apply(self, volume: str, transform: str, problem: dict | None = None) -> int:
        node = self.volume_id(volume)
        self.graph_volume(volume)["parent_transform"] = transform
        if problem:
            self.graph_volume(volume)["problem"] = problem
        return self.call("apply_transform", {"volume_name": volume, "transform_name": transform},
                         {"inputs": {"volume_id": node, "transform_id": transform},
                          "outputs": {"volume_id": node, "parent_transform_id": transform}})

    def resample(self, volume: str, transform: str, reference: str) -> str:
        name = f"{volume} resampled"
        node = self.add_volume(name, derived_from=self.volume_id(volume), via_transform=transform,
                               reference=self.volume_id(reference))
        self.call("resample_volume", {"volume_name": volume, "transform_name": transform,
                                      "reference_volume_ref": reference},
                  {"inputs": {"volume_id": self.volume_id(volume), "transform_id": transform,
                              "reference_volume_id": self.volume_id(reference)},
                   "outputs": {"volume_id": node, "volume_name": name}})
        return name

    def fusion(self, background: str, foreground: str) -> int:
        for view in self.state["views"].values():
            view.update(background=background, foreground=foreground)
        return self.call("fusion", {"background_volume_ref": background, "foreground_volume_ref": foreground},
                         {"background": background, "foreground": foreground, "foreground_opacity": 0.5})

    def segment(self, name: str, low: list[float], high: list[float], volume: float = 1.0,
                action: str = "segment_region", **statistics) -> int:
        return self.call(action, {"seeds_ras": [[(a + b) / 2 for a, b in zip(low, high, strict=True)]]},
                         {"outputs": {"segmentation_id": f"seg-{name}", "segmentation_name": name},
                          "segments": [{"segment": name, "volume_ml": volume, "bbox_ras": [low, high],
                                        "centroid_ras": [(a + b) / 2 for a, b in zip(low, high, strict=True)],
                                        **statistics}]})

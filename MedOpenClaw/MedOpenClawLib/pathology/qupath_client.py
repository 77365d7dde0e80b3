"""PathologyViewer over the QuPath bridge (Py4J): the same episode code drives QuPath or the file-backed bridge.

The Java side (``MedOpenClaw/QuPathBridge``) exposes one entry object whose methods are the named operations;
each returns ``{ok, data, error, state}`` as JSON. This client caches the last state the bridge reported, so
reading the view costs no round trip, and restores earlier states with named operations only (there is no
"set everything" backdoor on the Java side).

``FileBridgeProcess`` starts the bridge's file-backed gateway (no QuPath needed) as a child process bound to
127.0.0.1 with a fresh auth token; inside QuPath the extension starts the gateway and shows port and token.
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import secrets
import subprocess
import threading
from pathlib import Path

import numpy as np

from ..core import settings
from ..core.hygiene import text_problem
from ..core.result import ActionError, RenderedImage
from .geometry import ViewState
from .slide import SlideInfo

BRIDGE_MAIN = "org.medopenclaw.qupath.FileBridgeMain"
TOKEN_VARIABLE = "MEDOPENCLAW_BRIDGE_TOKEN"
PORT_LINE = "MEDOPENCLAW_BRIDGE_PORT"
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # .../MedOpenClaw
BRIDGE_DIR = _PACKAGE_ROOT / "QuPathBridge"
BUILD_SCRIPT = _PACKAGE_ROOT.parent / "scripts" / "build_qupath_bridge.sh"
MAX_ZOOM_FACTOR = 1024.0


def _number(value: float | None) -> float | None:
    """Py4J maps Python int to Java Integer, which does not bind to Double parameters: send floats."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return float(value)


def _parse_state(state: dict) -> tuple[ViewState, SlideInfo | None]:
    viewport = {"viewport_width": state["viewport_width"], "viewport_height": state["viewport_height"]}
    image, view = state.get("image"), state.get("view")
    if image is None or view is None:
        return ViewState(image_type=state["image_type"], **viewport), None
    info = SlideInfo(
        path=image["path"],
        width=image["width"],
        height=image["height"],
        level_dimensions=tuple((level["width"], level["height"]) for level in image["levels"]),
        level_downsamples=tuple(float(level["downsample"]) for level in image["levels"]),
        mpp=image["mpp"],
        base_magnification=image["base_magnification"],
        magnification_source=image["magnification_source"],
        backend="qupath-bridge",
    )
    view_state = ViewState(
        image_path=image["path"],
        image_type=state["image_type"],
        width=image["width"],
        height=image["height"],
        centre_x=float(view["centre_x"]),
        centre_y=float(view["centre_y"]),
        downsample=float(view["downsample"]),
        **viewport,
    )
    return view_state, info


class QuPathBridgeClient:
    """A :class:`~MedOpenClawLib.pathology.viewer.PathologyViewer` whose viewer lives behind the Py4J bridge."""

    def __init__(self, port: int, token: str, host: str = "127.0.0.1", read_timeout: float = 60.0):
        from py4j.java_gateway import GatewayParameters, JavaGateway

        self._gateway = JavaGateway(
            gateway_parameters=GatewayParameters(
                address=host,
                port=port,
                auth_token=token,
                auto_field=False,
                auto_convert=False,
                eager_load=False,
                read_timeout=read_timeout,
            ),
        )
        self._entry = self._gateway.entry_point
        self._state = ViewState()
        self._info: SlideInfo | None = None
        self._call("focusQupath")  # first contact: authenticates and reads the current state

    @classmethod
    def from_connection_file(cls, path: str | os.PathLike | None = None) -> QuPathBridgeClient:
        """Connect to the gateway the QuPath extension started (it writes ~/.medopenclaw/qupath-bridge.json)."""
        target = Path(path) if path else Path.home() / ".medopenclaw" / "qupath-bridge.json"
        try:
            connection = json.loads(target.read_text(encoding="utf-8"))
            port, token, host = int(connection["port"]), str(connection["token"]), connection.get("host", "127.0.0.1")
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ActionError("bridge_unavailable", f"no usable QuPath bridge connection file at {target} (start "
                                                    f"QuPath with the MedOpenClaw extension): {error}") from error
        return cls(port, token, host)

    # -- transport -------------------------------------------------------------------------------------------
    def _call(self, operation: str, *arguments) -> dict:
        from py4j.protocol import Py4JError

        for argument in arguments:  # NUL and other control characters never reach Java's Path.of or the protocol
            problem = text_problem(argument) if isinstance(argument, str) else None
            if problem:
                raise ActionError("invalid_argument", f"{operation}: the text argument {problem}")
        try:
            raw = getattr(self._entry, operation)(*(_number(argument) for argument in arguments))
        except Py4JError as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ActionError("bridge_unavailable", f"QuPath bridge call {operation} failed: {first_line}") from error
        response = json.loads(raw)
        self._state, self._info = _parse_state(response["state"])
        if not response["ok"]:
            raise ActionError(response["error"]["code"], response["error"]["message"])
        return response["data"]

    def disconnect(self) -> None:
        self._gateway.close()

    # -- PathologyViewer -------------------------------------------------------------------------------------
    def view_state(self) -> ViewState:
        return self._state

    def slide_info(self) -> SlideInfo | None:
        return self._info

    def overlays(self) -> dict[str, tuple[int, int, int, int]]:
        return {}  # QuPath draws its own overlays; their placement is not reported through the bridge

    def load_case(self, case_path: str, image_name: str | None = None) -> ViewState:
        self._call("loadCase", case_path, image_name)
        return self._state

    def load_image(self, path: str) -> ViewState:
        self._call("loadImage", path)
        return self._state

    def set_image_type(self, image_type: str) -> ViewState:
        self._call("setImageType", image_type)
        return self._state

    def zoom(self, direction, amount, unit, x, y) -> ViewState:
        self._call("zoom", direction, amount, unit, x, y)
        return self._state

    def pan(self, direction, amount, unit, x, y) -> ViewState:
        self._call("pan", direction, amount, unit, x, y)
        return self._state

    def focus_qupath(self) -> ViewState:
        self._call("focusQupath")
        return self._state

    def capture(self, label: str) -> RenderedImage:
        from PIL import Image

        data = self._call("captureViewer", label)
        png = base64.b64decode(data["png_base64"])
        pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
        return RenderedImage(view="wsi", width=data["width"], height=data["height"], pixels=pixels, _png=png)

    def viewer_point_to_wsi_coordinate(self, x: float, y: float) -> tuple[float, float]:
        data = self._call("viewerPointToWsiCoordinate", x, y)
        return float(data["x"]), float(data["y"])

    def record_view(self, label: str) -> dict:
        record = self._call("recordViewAsEvidence", label)
        return {key: value for key, value in record.items() if key != "kind"}

    def sleep(self, seconds: float) -> None:
        self._call("sleep", seconds)

    def close(self) -> None:
        self._call("close")

    def restore(self, state: ViewState) -> None:
        """Reach ``state`` with named operations: reopen, retype, zoom by the exact ratio, pan in wsi_px."""
        if state.image_path != self._state.image_path:
            if state.image_path is None:
                self.close()
                return
            self.load_image(state.image_path)
        if state.image_type != self._state.image_type:
            self.set_image_type(state.image_type)
        while not math.isclose(state.downsample, self._state.downsample, rel_tol=1e-12):
            ratio = self._state.downsample / state.downsample
            direction = "in" if ratio > 1 else "out"
            self.zoom(direction, min(max(ratio, 1 / ratio), MAX_ZOOM_FACTOR), "factor", None, None)
        for axis, (negative, positive) in (("centre_x", ("left", "right")), ("centre_y", ("up", "down"))):
            delta = getattr(state, axis) - getattr(self._state, axis)
            if abs(delta) > 1e-9:
                self.pan(positive if delta > 0 else negative, abs(delta), "wsi_px", None, None)


# -- the file-backed gateway process -------------------------------------------------------------------------


def bridge_jar() -> Path:
    """The bridge jar, built with scripts/build_qupath_bridge.sh when missing or older than its sources."""
    override = settings.value("MEDOPENCLAW_BRIDGE_JAR")
    if override:
        return Path(override)
    jar = BRIDGE_DIR / "build" / "medopenclaw-qupath-bridge.jar"
    sources = list((BRIDGE_DIR / "src" / "main" / "java").rglob("*.java"))
    if not sources:
        if jar.exists():
            return jar
        raise FileNotFoundError("QuPathBridge sources not found; set MEDOPENCLAW_BRIDGE_JAR to a built bridge jar")
    if not jar.exists() or jar.stat().st_mtime < max(source.stat().st_mtime for source in sources):
        import sys

        build = subprocess.run(["bash", str(BUILD_SCRIPT)], env={**os.environ, "PYTHON": sys.executable},
                               capture_output=True, text=True)
        if build.returncode != 0:
            raise RuntimeError(f"building the QuPath bridge failed: {build.stderr.strip()[-2000:]}")
    return jar


class FileBridgeProcess:
    """A running file-backed bridge gateway (Java child process); use as a context manager."""

    def __init__(
        self,
        data_roots: list[str | os.PathLike],
        viewport: tuple[int, int] = (1024, 768),
        audit_path: str | os.PathLike | None = None,
        java: str = "java",
        start_timeout: float = 30.0,
        connection_file: str | os.PathLike | None = None,
    ):
        """``connection_file``: also write {host, port, token} there, owner-only, as the QuPath extension does."""
        from py4j.java_gateway import find_jar_path

        self.token = secrets.token_hex(24)
        command = [java, "-cp", f"{bridge_jar()}{os.pathsep}{find_jar_path()}", BRIDGE_MAIN,
                   "--viewport", f"{viewport[0]}x{viewport[1]}"]
        for root in data_roots:
            command += ["--data-root", str(root)]
        if audit_path is not None:
            command += ["--audit", str(audit_path)]
        if connection_file is not None:
            command += ["--connection-file", str(connection_file)]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, TOKEN_VARIABLE: self.token},
        )
        self.port = self._read_port(start_timeout)

    def _read_port(self, timeout: float) -> int:
        found: list[str] = []
        reader = threading.Thread(target=lambda: found.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        line = found[0] if found else ""
        if not line.startswith(PORT_LINE):
            self.stop()
            error = self.process.stderr.read() if self.process.stderr else ""
            raise RuntimeError(f"the QuPath bridge gateway did not start: {line!r} {error.strip()}")
        return int(line.split()[1])

    def client(self, token: str | None = None) -> QuPathBridgeClient:
        return QuPathBridgeClient(self.port, self.token if token is None else token)

    def stop(self) -> None:
        """Closing stdin asks the gateway to shut down; kill it if it does not within a few seconds."""
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def __enter__(self) -> FileBridgeProcess:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


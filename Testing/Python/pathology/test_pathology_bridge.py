"""QuPath bridge: the bounded Py4J gateway over the file-backed ViewerPort, driven from Python.

Builds the bridge with scripts/build_qupath_bridge.sh (javac + the py4j wheel's jar), starts the gateway, calls
every named operation, checks that nothing else is reachable, and runs the same requests through the headless
engine to show both implementations of PathologyViewer agree.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from pathology_slides import REGIONS

from MedOpenClawLib.core.result import ActionError
from MedOpenClawLib.pathology.actions import build_pathology_registry
from MedOpenClawLib.pathology.viewer import HeadlessWsiViewer, PathologyViewer

if shutil.which("javac") is None or shutil.which("java") is None:
    pytest.skip("javac/java not found: the QuPath bridge cannot be built or run", allow_module_level=True)

from py4j.java_gateway import JavaObject  # noqa: E402
from py4j.protocol import Py4JError  # noqa: E402

from MedOpenClawLib.pathology.qupath_client import FileBridgeProcess, QuPathBridgeClient  # noqa: E402

VIEWPORT = (640, 480)


@pytest.fixture(scope="module")
def bridge(slide_root, tmp_path_factory):
    audit = tmp_path_factory.mktemp("bridge") / "bridge_audit.jsonl"
    with FileBridgeProcess([slide_root], viewport=VIEWPORT, audit_path=audit) as process:
        process.audit_path = audit
        yield process


@pytest.fixture
def client(bridge):
    viewer = bridge.client()
    yield viewer
    viewer.disconnect()


def test_every_operation_through_py4j(bridge, client, slide_path):
    assert isinstance(client, PathologyViewer)
    state = client.load_case("case_regions", None)
    assert state.image_path == slide_path and (state.width, state.height) == (6000, 4000)
    info = client.slide_info()
    assert info.level_dimensions == ((6000, 4000), (1500, 1000), (375, 250))
    assert info.mpp == pytest.approx(0.25) and info.base_magnification == pytest.approx(40.0)
    assert client.load_image(slide_path).downsample == pytest.approx(6000 / 640)
    assert client.set_image_type("BRIGHTFIELD_H_E").image_type == "BRIGHTFIELD_H_E"
    assert client.zoom("in", 2, "factor", None, None).downsample == pytest.approx(6000 / 640 / 2)
    assert client.pan("right", 100, "wsi_px", None, None).centre_x == pytest.approx(3100)
    assert client.focus_qupath().centre_x == pytest.approx(3100)
    image = client.capture("field")
    assert (image.width, image.height) == VIEWPORT and image.png_bytes().startswith(b"\x89PNG")
    x, y = client.viewer_point_to_wsi_coordinate(499.5, 499.5)
    assert (x, y) == pytest.approx((3100, 2000))
    record = client.record_view("roi")
    assert record["label"] == "roi" and record["image"] == "regions.tif"
    client.sleep(0.01)
    client.close()
    assert not client.view_state().has_image
    operations = [line["operation"] for line in map(json.loads, bridge.audit_path.read_text().splitlines())]
    for name in ("load_case", "load_image", "set_image_type", "zoom", "pan", "focus_qupath", "capture_viewer",
                 "viewer_point_to_wsi_coordinate", "record_view_as_evidence", "sleep", "close"):
        assert name in operations


def test_nothing_else_is_callable(bridge, client):
    entry = client._gateway.entry_point
    for method in ("getClass", "toString", "hashCode", "notify", "wait", "exec", "forName", "getCore"):
        with pytest.raises(Py4JError) as refused:
            getattr(entry, method)()
        assert f"refused: '{method}'" in str(refused.value)
    with pytest.raises(Py4JError):
        client._gateway.jvm.java.lang.Runtime.getRuntime()
    with pytest.raises(Py4JError):
        client._gateway.jvm.java.lang.Class.forName("java.lang.Runtime")
    gateway_server = JavaObject("GATEWAY_SERVER", client._gateway._gateway_client)  # bound by Py4J itself
    with pytest.raises(Py4JError) as refused:
        gateway_server.getGateway()
    assert "refused" in str(refused.value)
    assert client.focus_qupath() is not None, "the bridge still serves named operations afterwards"


def test_wrong_token_is_refused(bridge):
    with pytest.raises(ActionError) as refused:
        QuPathBridgeClient(bridge.port, "0" * 48)
    assert refused.value.code == "bridge_unavailable"


@pytest.mark.parametrize(
    "operation, arguments, code",
    [
        ("load_image", ("/etc/hostname",), "path_not_allowed"),
        ("load_image", ("missing.tif",), "not_found"),
        ("load_image", ("not_a_slide.tif",), "unreadable_image"),
        ("zoom", ("in", 1, "factor", None, None), "invalid_argument"),
        ("zoom", ("in", 2, "furlongs", None, None), "invalid_argument"),
        ("pan", ("left", 1, "viewport", 5, 5), "invalid_argument"),
        ("viewer_point_to_wsi_coordinate", (1000, 3), "invalid_argument"),
        ("set_image_type", ("H&E",), "invalid_argument"),
        ("sleep", (11,), "invalid_argument"),
        ("record_view", ("",), "invalid_argument"),
    ],
)
def test_bridge_refusals_change_nothing(client, slide_path, operation, arguments, code):
    client.load_image(slide_path)
    client.zoom("in", 3, "factor", 200, 300)
    before = client.view_state()
    with pytest.raises(ActionError) as refused:
        getattr(client, operation)(*arguments)
    assert refused.value.code == code and refused.value.message
    assert client.view_state() == before


SEQUENCE = [
    ("zoom", ("in", 3, "factor", 120, 800)),
    ("pan", ("right", 0.3, "viewport", None, None)),
    ("zoom", (None, 10, "magnification", None, None)),
    ("pan", (None, None, "viewport", 900, 50)),
    ("zoom", ("in", 3, "steps", None, None)),
    ("pan", ("up", 250, "screen_px", None, None)),
    ("pan", ("left", 10**7, "wsi_px", None, None)),
    ("zoom", ("out", 1000, "factor", None, None)),
    ("zoom", ("in", 1024, "factor", 999, 999)),
]


def test_headless_engine_and_bridge_agree(client, slide_path):
    """Conformance: the same requests give the same states and coordinates on both PathologyViewers."""
    engine = HeadlessWsiViewer(VIEWPORT)
    viewers = (engine, client)
    for viewer in viewers:
        viewer.load_image(slide_path)
    for name, arguments in SEQUENCE:
        states = [getattr(viewer, name)(*arguments) for viewer in viewers]
        for field in ("centre_x", "centre_y", "downsample"):
            assert getattr(states[0], field) == pytest.approx(getattr(states[1], field), rel=1e-9, abs=1e-6), name
        points = [viewer.viewer_point_to_wsi_coordinate(17, 923) for viewer in viewers]
        assert points[0] == pytest.approx(points[1], rel=1e-9, abs=1e-6)
        records = [viewer.record_view("r") for viewer in viewers]
        assert records[0]["field"] == pytest.approx(records[1]["field"], abs=1e-3)
    engine.close()


def test_bridge_snapshot_shows_regions_where_the_geometry_says(client, slide_path):
    client.load_image(slide_path)
    (x0, y0, x1, y1), colour = REGIONS["red"]
    state = client.view_state()
    nx, ny = state.wsi_to_normalised((x0 + x1) / 2, (y0 + y1) / 2)
    state = client.zoom("in", 4, "factor", round(nx), round(ny))
    pixels = client.capture("red").pixels.astype(int)
    sx0 = (x0 - state.centre_x) / state.downsample + VIEWPORT[0] / 2
    sx1 = (x1 - state.centre_x) / state.downsample + VIEWPORT[0] / 2
    row = pixels[VIEWPORT[1] // 2]
    columns = np.flatnonzero(np.abs(row - np.array(colour)).sum(axis=1) < 60)
    assert abs(columns[0] - sx0) <= 1.5 and abs(columns[-1] + 1 - sx1) <= 1.5


def test_registry_runs_unchanged_over_the_bridge(bridge, slide_root, client):
    registry = build_pathology_registry([slide_root], max_rounds=20, viewer=client)
    assert registry.call("load_case", {"case_path": "case_regions"}, actor="system").ok
    token = registry.context.checkpoint()
    before = client.view_state()
    assert registry.call("zoom", {"direction": "in", "amount": 5, "x": 300, "y": 300}).ok
    assert registry.call("pan", {"direction": "down", "amount": 0.2}).ok
    captured = registry.call("capture_viewer", {"label": "bridge"})
    assert captured.ok and captured.images[0].width == VIEWPORT[0]
    point = registry.call("viewer_point_to_wsi_coordinate", {"x": 500, "y": 500})
    assert point.ok and point.data["inside_slide"]
    observation = registry.context.observation()
    assert "Image: regions.tif" in observation.direct_state_summary and observation.image is not None
    registry.context.rollback(token)  # restores through named operations only
    after = client.view_state()
    assert after.image_path == before.image_path
    for field in ("centre_x", "centre_y", "downsample"):
        assert getattr(after, field) == pytest.approx(getattr(before, field), rel=1e-9)
    assert registry.context.evidence_json() == {"captures": [], "recorded_views": []}


# ---------------------------------------------------------- the bridge's Py4J surface and its refusals
def test_memory_delete_of_the_entry_point_is_refused(bridge, client):
    """Py4J's MemoryCommand compares ids with != and would release the shared entry point ("m d t")."""
    for shared in ("t", "j", "GATEWAY_SERVER"):
        answer = client._gateway._gateway_client.send_command(f"m\nd\n{shared}\ne\n")
        assert answer.startswith("x") and "never released" in answer  # "x": an error answer
    assert client.focus_qupath() is not None
    other = bridge.client()
    assert other.focus_qupath() is not None, "every client still reaches the entry point"
    other.disconnect()


def test_unknown_memory_sub_command_is_refused(bridge):
    attacker = bridge.client()
    answer = attacker._gateway._gateway_client.send_command("m\na\nt\ne\n")
    assert answer.startswith("z") and "refused: memory sub-command 'a'" in answer  # "z": a Java exception
    attacker.disconnect()
    fresh = bridge.client()
    assert fresh.focus_qupath() is not None
    fresh.disconnect()


@pytest.mark.parametrize("path", ["regions\x00.tif", "a\nb.tif", "x" * 5000])
def test_invalid_paths_get_clear_errors_on_both_sides(client, path):
    with pytest.raises(ActionError) as refused:  # the Python client refuses before sending
        client.load_image(path)
    assert refused.value.code == "invalid_argument"
    response = json.loads(client._entry.loadImage(path))  # a client that skips the check meets the Java side
    assert not response["ok"] and response["error"]["code"] == "invalid_argument", response["error"]


def test_connection_file_is_owner_only_and_usable(slide_root, tmp_path):
    connection = tmp_path / "bridge.json"
    with FileBridgeProcess([slide_root], viewport=VIEWPORT, connection_file=connection) as process:
        assert connection.stat().st_mode & 0o777 == 0o600
        data = json.loads(connection.read_text())
        assert data == {"host": "127.0.0.1", "port": process.port, "token": process.token}
        viewer = QuPathBridgeClient.from_connection_file(connection)
        assert viewer.focus_qupath() is not None
        viewer.disconnect()
    with pytest.raises(ActionError) as refused:
        QuPathBridgeClient.from_connection_file(tmp_path / "missing.json")
    assert refused.value.code == "bridge_unavailable"

"""REST front-end: token, routes, Result shape, loopback binding, and no code-execution path anywhere."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
import requests
from runtime_data import oblique_lps_affine, phantom, write_nifti

import MedOpenClawLib
from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.server.rest import RestService
from MedOpenClawLib.server.rest_app import BackgroundRestServer

TOKEN = "test-token-123"


@pytest.fixture()
def server(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    write_nifti(root / "CT.nii.gz", phantom(0), oblique_lps_affine())
    registry = build_slicer_registry([root])
    with BackgroundRestServer(registry, TOKEN) as running:
        yield f"http://127.0.0.1:{running.port}", root, running


def auth(token=TOKEN):
    return {"Authorization": f"Bearer {token}"}


def test_token_is_required(server):
    url, _, _ = server
    assert requests.get(f"{url}/v1/tools", timeout=5).status_code == 401
    assert requests.get(f"{url}/v1/tools", headers=auth("wrong"), timeout=5).status_code == 401
    response = requests.post(f"{url}/v1/actions/ping", headers=auth("wrong"), json={}, timeout=5)
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"


def test_tools_actions_state_and_trace(server):
    url, root, running = server
    tools = requests.get(f"{url}/v1/tools", headers=auth(), timeout=5).json()
    assert "open_case" in {tool["name"] for tool in tools}
    openai = requests.get(f"{url}/v1/tools?format=openai", headers=auth(), timeout=5).json()
    assert openai[0]["type"] == "function"
    assert requests.get(f"{url}/v1/tools?format=xml", headers=auth(), timeout=5).status_code == 400
    opened = requests.post(f"{url}/v1/actions/open_case", headers=auth(), json={"dicom_dir": str(root), "size": 128},
                           timeout=30).json()
    assert opened["ok"] and len(opened["images"]) == 3
    assert base64.b64decode(opened["images"][0]["png_base64"]).startswith(b"\x89PNG")
    assert opened["images"][0]["width"] == 128 and "slice_offset_mm" in opened["images"][0]
    state = requests.get(f"{url}/v1/state", headers=auth(), timeout=5).json()
    assert state["active_volume"] == "CT"
    bad = requests.post(f"{url}/v1/actions/set_slice_offset", headers=auth(), json={"view": "axial"}, timeout=5)
    assert bad.status_code == 200 and bad.json()["error"]["code"] == "invalid_argument"
    trace = requests.get(f"{url}/v1/trace", headers=auth(), timeout=5).json()
    assert [record.get("action") for record in trace if record["kind"] == "action"] == ["open_case",
                                                                                         "set_slice_offset"]
    assert running.service.registry.trace.records[-1]["actor"] == "agent"
    human = requests.post(f"{url}/v1/actions/ping", headers={**auth(), "X-Actor": "human"}, timeout=5)
    assert human.status_code == 403 and human.json()["error"]["code"] == "actor_not_allowed"
    robot = requests.post(f"{url}/v1/actions/ping", headers={**auth(), "X-Actor": "robot"}, timeout=5)
    assert robot.status_code == 400


def test_unknown_action_bad_json_and_unknown_routes(server):
    url, _, _ = server
    unknown = requests.post(f"{url}/v1/actions/exec", headers=auth(), json={"code": "1"}, timeout=5)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_action"
    deep = "[" * 40 + "]" * 40  # beyond the hygiene's nesting limit: still an unknown action first
    unknown = requests.post(f"{url}/v1/actions/exec", headers=auth(), data=deep, timeout=5)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_action"
    described = requests.get(f"{url}/v1/tools", headers=auth(), timeout=5).json()
    assert {tool["application"] for tool in described} == {"radiology"}
    neutral = requests.get(f"{url}/v1/tools?format=neutral", headers=auth(), timeout=5).json()
    assert set(neutral[0]) == {"name", "description", "parameters"}
    bad_json = requests.post(f"{url}/v1/actions/ping", headers=auth(), data=b"{not json", timeout=5)
    assert bad_json.status_code == 400 and bad_json.json()["error"]["code"] == "invalid_json"
    for path in ("/slicer/exec", "/v1/exec", "/v1/python", "/"):
        assert requests.post(f"{url}{path}", headers=auth(), json={}, timeout=5).status_code == 404
    assert requests.get(f"{url}/v1/actions/ping", headers=auth(), timeout=5).status_code == 405


def test_routing_errors_quote_the_path_and_connections_are_kept_alive(server):
    """HTTP/1.1 keep-alive: two requests, one connection; a route that does not exist is named in the error."""
    import http.client
    import json

    _, _, running = server
    connection = http.client.HTTPConnection("127.0.0.1", running.port, timeout=5)
    connection.request("GET", "/", headers=auth())
    root = connection.getresponse()
    body, kept = json.loads(root.read()), connection.sock
    assert root.status == 404 and root.version == 11 and not root.will_close and kept is not None
    assert body["error"]["code"] == "not_found" and "GET '/'" in body["error"]["message"]
    connection.request("POST", "/v1/nothing/here?x=1", body=b"{}", headers=auth())
    nested = connection.getresponse()
    assert "POST '/v1/nothing/here'" in json.loads(nested.read())["error"]["message"]
    assert connection.sock is kept  # the same connection answered both
    connection.close()


def test_the_openapi_document_is_valid_and_lists_the_catalog(server):
    """GET /v1/openapi.json: an OpenAPI 3.1 document that a real validator accepts, with one operation per action
    the session offers (its request body the action's own schema) and only routes the server answers."""
    from openapi_spec_validator import validate

    from MedOpenClawLib import apps

    url, _, running = server
    assert requests.get(f"{url}/v1/openapi.json", timeout=5).status_code == 401
    document = requests.get(f"{url}/v1/openapi.json", headers=auth(), timeout=5).json()
    validate(document)
    actions = {action.name: action for action in running.service.registry.actions()}
    assert set(actions) == {entry["name"] for entry in apps.entries("radiology", "A")}
    operations = {path.removeprefix("/v1/actions/"): item["post"] for path, item in document["paths"].items()
                  if path.startswith("/v1/actions/")}
    assert set(operations) == set(actions)
    for name, operation in operations.items():
        assert operation["requestBody"]["content"]["application/json"]["schema"] == actions[name].parameters
    assert document["paths"]["/v1/tools"]["get"]["parameters"][1]["schema"]["enum"] == sorted(apps.FORMATS)
    for path, item in document["paths"].items():
        if "get" in item:
            assert requests.get(f"{url}{path}", headers=auth(), timeout=5).status_code == 200, path


def test_server_binds_loopback_only(server):
    _, _, running = server
    assert running.host == "127.0.0.1"


def test_service_routes_are_exactly_the_documented_ones():
    source = Path(RestService.__module__.replace(".", "/") + ".py")
    text = (Path(MedOpenClawLib.__file__).parent / source.relative_to("MedOpenClawLib")).read_text()
    routes = set(re.findall(r'"(/v1/[a-z_/.]*)"', text))
    assert routes == {"/v1/tools", "/v1/state", "/v1/trace", "/v1/actions/", "/v1/sessions", "/v1/sessions/",
                      "/v1/openapi.json"}


CODE_EXECUTION = re.compile(r"(?<![\w.])(eval|exec|compile|execfile)\s*\(|os\.system\s*\(|shell\s*=\s*True|"
                            r"__import__\s*\(|pickle\.loads?\s*\(")


def test_no_code_execution_is_reachable_in_the_package():
    package = Path(MedOpenClawLib.__file__).parent
    offenders = []
    for path in package.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if CODE_EXECUTION.search(line.split("#")[0]):
                offenders.append(f"{path.relative_to(package)}:{number}: {line.strip()}")
    assert offenders == []


@pytest.mark.parametrize("fast", [True, False], ids=["isal", "zlib"])
def test_views_are_encoded_losslessly_once_and_relayed_as_sent(monkeypatch, fast):
    import io
    import sys

    import numpy as np
    from PIL import Image

    from MedOpenClawLib.core.result import RenderedImage, Result

    if not fast:
        monkeypatch.setitem(sys.modules, "isal", None)  # as in Slicer's own Python: zlib deflates
    rng = np.random.default_rng(0)
    images = [RenderedImage("axial", 64, 48, pixels=rng.integers(0, 255, (48, 64), dtype=np.uint8)),
              RenderedImage("fused", 64, 48, pixels=rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)),
              RenderedImage("wsi", 64, 48, pixels=rng.integers(0, 255, (48, 64, 4), dtype=np.uint8)[::-1])]
    images[1].encode_ahead()  # as a view returned to an agent: encoding starts when it is rendered
    sent = Result(True, images=images).to_json()
    assert images[1]._encoding is None and images[1]._png is not None  # waited for, kept, not encoded again
    for image, item in zip(images, sent["images"]):
        decoded = np.asarray(Image.open(io.BytesIO(base64.b64decode(item["png_base64"]))))
        assert np.array_equal(decoded, image.pixels)
    relayed = Result.from_json(sent)  # e.g. a supervised viewer's answer in the server process
    again = relayed.to_json()
    assert [item["png_base64"] for item in again["images"]] == [item["png_base64"] for item in sent["images"]]
    assert all(image._png is None for image in relayed.images)  # never decoded to be re-encoded
    assert relayed.images[0].png_bytes() == images[0].png_bytes()


@pytest.mark.parametrize("fast", [True, False], ids=["isal", "zlib"])
def test_a_view_encoded_ahead_is_deflated_in_stripes_into_the_same_png(monkeypatch, fast):
    """A view taller than a stripe is deflated stripe by stripe, each once, into exactly the PNG a plain encoding
    gives, lossless: by an encoder thread as soon as it is made; by whoever waits for it too, which alone
    finishes it when every encoder thread is busy; a stripe that fails fails the view for whoever waits for it,
    and the encoders go on."""
    import io
    import sys
    import threading

    import numpy as np
    from PIL import Image

    from MedOpenClawLib.core import png

    if not fast:
        monkeypatch.setitem(sys.modules, "isal", None)  # as in Slicer's own Python: zlib deflates
    deflated_on: list[str] = []
    deflate = png._deflate

    def recording(data, last):
        deflated_on.append(threading.current_thread().name)
        return deflate(data, last)

    monkeypatch.setattr(png, "_deflate", recording)
    rng = np.random.default_rng(1)
    rows = 2 * png.STRIPE_ROWS + 3
    for pixels in (rng.integers(0, 40, (rows, 300), dtype=np.uint8),
                   rng.integers(0, 255, (rows, 70, 3), dtype=np.uint8), np.zeros((png.STRIPE_ROWS, 8, 4), np.uint8)):
        deflated_on.clear()
        encoding = png.PngEncoding(pixels)
        assert encoding._done.wait(30)  # nobody waits for it: the encoder thread alone
        encoded = encoding.result()
        assert len(deflated_on) == -(-pixels.shape[0] // png.STRIPE_ROWS)
        assert all(name.startswith("png") for name in deflated_on)
        assert encoded.png == png.encode_png(pixels) and base64.b64decode(encoded.base64) == encoded.png
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(encoded.png))), pixels)

    release = threading.Event()
    busy = [png.encoders().submit(release.wait, 30) for _ in range(png.encoders()._max_workers)]
    deflated_on.clear()
    pixels = rng.integers(0, 255, (rows, 64), dtype=np.uint8)
    try:
        assert png.PngEncoding(pixels).result(timeout=30).png == png.encode_png(pixels)
        assert deflated_on[:3] == [threading.current_thread().name] * 3  # the waiter deflated every stripe
    finally:
        release.set()
    assert all(job.result(timeout=30) for job in busy)

    def failing(data, last):
        if last:
            raise MemoryError("no room for the last stripe")
        return deflate(data, last)

    monkeypatch.setattr(png, "_deflate", failing)
    with pytest.raises(MemoryError, match="last stripe"):
        png.PngEncoding(np.ones((rows, 16), dtype=np.uint8)).result(timeout=30)
    monkeypatch.setattr(png, "_deflate", deflate)
    later = png.PngEncoding(np.ones((rows, 16), dtype=np.uint8)).result(timeout=30)
    assert later.png == png.encode_png(np.ones((rows, 16), dtype=np.uint8))


def test_a_response_splices_its_own_base64_and_is_the_json_the_encoder_writes():
    """The base64 this process encoded is spliced into the answer unscanned; the bytes are exactly what
    ``json.dumps`` writes, whatever else the body holds (text a viewer in another process sent stays escaped),
    and a body that cannot be strict JSON is still a 500."""
    import json
    import math

    import numpy as np

    from MedOpenClawLib.core.result import RenderedImage, Result
    from MedOpenClawLib.server.rest import Response

    pixels = np.arange(64 * 48, dtype=np.uint16).reshape(48, 64).astype(np.uint8)
    result = Result(True, data={"note": 'quote " backslash \\ nul \x00 and é', "nested": [{"k": (1, 2.5)}]},
                    images=[RenderedImage("axial", 64, 48, pixels=pixels), RenderedImage("coronal", 64, 48,
                                                                                         pixels=pixels.T.copy())])
    body = result.to_json()
    body["relayed"] = 'from another process: "\u0000 not base64'  # a plain str: escaped as usual
    assert Response(200, body).encode() == json.dumps(body).encode("utf-8")
    assert json.loads(Response(200, body).encode())["images"][1]["png_base64"] == result.images[1].png_base64()
    failing = Response(200, {"value": math.nan, "images": body["images"]})
    assert json.loads(failing.encode())["error"]["code"] == "unencodable_response" and failing.status == 500


def test_sessions_of_their_own_are_separate_bounded_and_expire():
    """Two REST clients, each in a session of its own (POST /v1/sessions, then the session header): neither sees
    the other's scene or trace, nor the shared session's; a third is refused at the bound; an ended or expired
    session is unknown, and its place is free again."""
    import time

    from agents_fakes import toy_registry

    from MedOpenClawLib.core.audit import AuditTrace
    from MedOpenClawLib.server.rest import SESSION_HEADER
    from MedOpenClawLib.server.sessions import SessionPool

    built: list = []

    def factory(number: int, client: dict):
        built.append(toy_registry(AuditTrace(None, header={"session": number})))
        return built[-1]

    pool = SessionPool(factory, max_sessions=2, idle_s=0.5)
    shared = toy_registry(AuditTrace(None))
    with BackgroundRestServer(shared, TOKEN, sessions=pool) as running:
        url = f"http://127.0.0.1:{running.port}"

        def open_session() -> requests.Response:
            return requests.post(f"{url}/v1/sessions", headers=auth(), timeout=5)

        first, second = (open_session().json()["session"] for _ in range(2))
        refused = open_session()
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "too_many_sessions"

        def act(session: str, name: str, **arguments) -> requests.Response:
            return requests.post(f"{url}/v1/actions/{name}", headers={**auth(), SESSION_HEADER: session},
                                 json=arguments, timeout=5)

        assert act(first, "set_slice_offset", offset=12.0).json()["ok"]
        assert act(second, "observe", size=8).json()["data"] == {"offset": 0.0}
        states = [requests.get(f"{url}/v1/state", headers={**auth(), SESSION_HEADER: key}, timeout=5).json()
                  for key in (first, second)]
        assert states == [{"offset": 12.0}, {"offset": 0.0}]
        assert requests.get(f"{url}/v1/state", headers=auth(), timeout=5).json() == {"offset": 0.0}
        traces = [[record.get("action") for record in requests.get(
            f"{url}/v1/trace", headers={**auth(), SESSION_HEADER: key}, timeout=5).json() if record.get("action")]
            for key in (first, second)]
        assert traces == [["set_slice_offset"], ["observe"]]
        assert not [record for record in shared.trace.records if record.get("action")]

        assert requests.delete(f"{url}/v1/sessions/{first}", headers=auth(), timeout=5).json()["closed"]
        gone = act(first, "observe")
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "unknown_session"
        third = open_session().json()["session"]  # the ended session's place is free
        with pool.use(third):  # idle for 0.5 s, the second expires; one holding a request never does
            time.sleep(1.0)
            assert pool.number(second) is None and pool.number(third) == 3
        assert act(second, "observe").json()["error"]["code"] == "unknown_session"
        time.sleep(1.0)
        assert act(third, "observe").json()["error"]["code"] == "unknown_session"
    pool.close()
    assert len(pool) == 0


def test_a_server_with_one_scene_has_no_sessions(server):
    url, _, _ = server
    refused = requests.post(f"{url}/v1/sessions", headers=auth(), timeout=5)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "sessions_unavailable"
    unknown = requests.get(f"{url}/v1/state", headers={**auth(), "MedOpenClaw-Session": "nope"}, timeout=5)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_session"


def test_a_session_keeps_its_slot_until_its_viewer_is_gone():
    """30 open/end cycles with max_sessions 1: while a session's viewer is being stopped, its slot is still
    taken (a new session is refused), so never more than one viewer is alive; the bound itself is bounded."""
    from MedOpenClawLib.core.result import ActionError
    from MedOpenClawLib.server.sessions import MAX_SESSIONS, SessionPool

    alive, peak, refused = [0], [0], []

    class Viewer:
        def __init__(self):
            alive[0] += 1
            peak[0] = max(peak[0], alive[0])

        def close(self):  # stopping the process: meanwhile another client asks for a session
            try:
                pool.open("meanwhile")
            except ActionError as error:
                refused.append(error.code)
            alive[0] -= 1

    pool = SessionPool(lambda number, client: Viewer(), max_sessions=1, closing_wait_s=0)  # refused at once
    for cycle in range(30):
        pool.open(f"s{cycle}")
        assert pool.release(f"s{cycle}") and not pool.release(f"s{cycle}")
    assert peak[0] == 1 and refused == ["too_many_sessions"] * 30 and len(pool) == 0
    with pytest.raises(ValueError, match=f"from 1 to {MAX_SESSIONS}"):
        SessionPool(lambda number, client: Viewer(), max_sessions=1_000_000_000)

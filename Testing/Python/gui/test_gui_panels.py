"""The MedOpenClaw panels as real Qt widgets (PySide6, offscreen) bound to a real slicer-core session:
live audit table, filter, details, restore, export/verify; REST server start/stop on 127.0.0.1 with token."""

from __future__ import annotations

import os
import threading

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
import requests  # noqa: E402
from gui_helpers import pump  # noqa: E402

from MedOpenClawLib.gui.app_session import AppSession  # noqa: E402
from MedOpenClawLib.gui.audit_panel import AuditLogPanel  # noqa: E402
from MedOpenClawLib.gui.loopback_server import HttpParseError, HttpRequestReader  # noqa: E402
from MedOpenClawLib.gui.qt_compat import qt, read  # noqa: E402
from MedOpenClawLib.gui.server_panel import ServerControlsPanel  # noqa: E402


@pytest.fixture
def app_session(qt_application, slicer_session):
    session = AppSession(slicer_session)
    yield session
    session.stop_server()


def in_thread(function):
    """Run a blocking HTTP client off the GUI thread while the test pumps Qt events (as Slicer's loop would)."""
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("value", function()), daemon=True)
    thread.start()
    pump(lambda: not thread.is_alive())
    return box["value"]


def test_audit_panel_live_rows_filter_details_restore_export(app_session, tmp_path):
    panel = AuditLogPanel()
    panel.attach(app_session)
    rows_before = panel.table.rowCount()
    assert rows_before == len(app_session.trace.records)
    registry = app_session.registry
    registry.call("set_slice_offset", {"view": "axial", "offset": 6.0, "size": 64})
    registry.call("jump", {"ras": [999, 0, 0]})
    pump(lambda: panel.table.rowCount() == rows_before + 2)  # the QTimer drained the live feed
    assert panel.table.item(rows_before, 3).text() == "set_slice_offset"

    panel.status_combo.setCurrentIndex(panel.status_combo.findText("error"))
    assert panel.table.rowCount() == 1 and panel.table.item(0, 3).text() == "jump"
    panel.select_row(0)
    assert read(panel.restore_button, "enabled")
    assert "jump" in read(panel.details_title, "text") and "ras" in panel.arguments_text.toPlainText()
    registry.call("<b>not_an_action</b>", {})  # a client-chosen name is quoted, never rendered as HTML
    pump(lambda: panel.table.rowCount() == 2)
    panel.select_row(1)
    assert "<b>not_an_action</b>" in read(panel.details_title, "text")
    assert panel.details_title.textFormat() == qt.Qt.PlainText
    panel.status_combo.setCurrentIndex(0)
    panel.filter_edit.setText("set_slice_offset")
    assert panel.table.rowCount() == 1
    panel.select_row(0)
    assert panel.views_layout.count() == 1  # the saved render of that action is shown

    registry.call("set_slice_offset", {"view": "axial", "offset": -8.0, "size": 64}, actor="agent")
    panel.restore_button.click()
    assert registry.context.state()["views"]["axial"]["offset_mm"] == pytest.approx(6.0)
    assert read(panel.status_label, "text").startswith("view of record #")

    archive = panel.export_to(tmp_path / "out" / "trace.zip")
    assert archive.is_file() and "artifacts" in read(panel.status_label, "text")
    panel.verify_button.click()
    assert read(panel.status_label, "text").startswith("Trace intact")
    panel.detach()


def test_server_panel_serves_the_registry_on_loopback_with_a_token(app_session):
    panel = ServerControlsPanel(new_session=lambda *args: pytest.fail("no new session expected"))
    panel.attach(app_session)
    panel.port_spin.setValue(0)
    panel.server_button.click()
    assert app_session.serving and read(panel.server_button, "text") == "Stop server"
    url = read(panel.url_label, "text")
    assert url.startswith("http://127.0.0.1:")
    headers = {"Authorization": f"Bearer {app_session.token}"}
    tools = in_thread(lambda: requests.get(f"{url}/v1/tools", headers=headers, timeout=5))
    assert tools.status_code == 200 and any(tool["name"] == "observe" for tool in tools.json())
    observed = in_thread(lambda: requests.post(f"{url}/v1/actions/observe", json={"view": "axial", "size": 64},
                                               headers={**headers, "X-Actor": "agent"}, timeout=5))
    assert observed.status_code == 200 and observed.json()["images"][0]["png_base64"]
    assert app_session.trace.records[-1]["action"] == "observe"
    denied = in_thread(lambda: requests.get(f"{url}/v1/state", headers={"Authorization": "Bearer wrong"}, timeout=5))
    assert denied.status_code == 401
    exec_route = in_thread(lambda: requests.post(f"{url}/slicer/exec", data="import os", headers=headers, timeout=5))
    assert exec_route.status_code == 404

    panel.copy_token_button.click()
    assert qt.QApplication.clipboard().text() == app_session.token
    panel.budget_spin.setValue(5)
    assert app_session.policy.max_rounds == 5
    assert app_session.trace.records[-1]["payload"] == {"max_rounds": 5}
    panel.add_root("/definitely/not/a/dir")
    assert "not a directory" in read(panel.status_label, "text") and panel.roots_list.count() == 1

    panel.server_button.click()
    assert not app_session.serving and read(panel.url_label, "text") == "stopped"
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{url}/v1/tools", headers=headers, timeout=2)


def test_request_reader_frames_and_rejects_requests():
    reader = HttpRequestReader()
    assert reader.feed(b"POST /v1/actions/ping HTTP/1.1\r\nContent-Length: 4\r\nAuthorization: Bearer x\r\n") is None
    assert reader.feed(b"\r\n{}") is None
    request = reader.feed(b"  ")
    assert (request.method, request.target, request.headers["authorization"], request.body) == (
        "POST", "/v1/actions/ping", "Bearer x", b"{}  ")
    for raw, status in ((b"GARBAGE\r\n\r\n", 400), (b"BREW / HTTP/1.1\r\n\r\n", 405),
                        (b"POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", 413),
                        (b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400),
                        (b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
                        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
                        (b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 65 + b"\r\n", 431)):
        with pytest.raises(HttpParseError) as error:
            HttpRequestReader().feed(raw)
        assert error.value.status == status
    with pytest.raises(HttpParseError):
        HttpRequestReader().feed(b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 20000)

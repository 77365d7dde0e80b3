"""Scripted offscreen session that renders the MedOpenClaw and MedCopilot panels to docs/*.png.

The panels run under PySide6 (QT_QPA_PLATFORM=offscreen) on a real slicer-core scene with a synthetic case:
an agent drives the registry over the loopback REST server, the clinician acts too, and a scripted model
(no network) proposes actions in the copilot. Run: python scripts/gui_screenshots.py [--out docs]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Testing" / "Python"))  # the synthetic case the GUI tests use

import requests  # noqa: E402
from agents_fakes import ScriptedModel  # noqa: E402
from gui_helpers import open_slicer_session, pump, start_qt_application  # noqa: E402

from MedCopilotLib.panel import CopilotPanel  # noqa: E402
from MedCopilotLib.settings import DictSettingsStore  # noqa: E402
from MedOpenClawLib.gui.app_session import AppSession  # noqa: E402
from MedOpenClawLib.gui.audit_panel import AuditLogPanel  # noqa: E402
from MedOpenClawLib.gui.qt_compat import qt  # noqa: E402
from MedOpenClawLib.gui.server_panel import ServerControlsPanel  # noqa: E402


def agent_requests(url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}", "X-Actor": "agent"}
    for name, arguments in (("observe", {"size": 128}),
                            ("scroll", {"view": "axial", "direction": "up", "num_slices": 3, "size": 128}),
                            ("image_coords_to_ras", {"view": "axial", "point_1000": [470, 530]}),
                            ("jump", {"ras": [500, 0, 0]}),
                            ("bookmark_view", {"view": "axial", "label": "suspected lesion"})):
        requests.post(f"{url}/v1/actions/{name}", json=arguments, headers=headers, timeout=10)


def medopenclaw_panel(session: AppSession, out: Path) -> None:
    window = qt.QWidget()
    window.setWindowTitle("MedOpenClaw")
    layout = qt.QVBoxLayout(window)
    server = ServerControlsPanel(new_session=lambda *args: session)
    server.attach(session)
    server.port_spin.setValue(0)
    server.server_button.click()
    audit = AuditLogPanel()
    audit.attach(session)
    layout.addWidget(server.widget)
    layout.addWidget(audit.widget, 1)
    window.resize(620, 1040)
    window.show()
    client = threading.Thread(target=agent_requests, args=(session.server.url, session.token))
    client.start()
    pump(lambda: not client.is_alive(), timeout_s=60)
    session.registry.call("window_preset", {"preset": "mr_auto", "size": 128}, actor="human")
    pump(lambda: audit.table.rowCount() == len(session.trace.records))
    rows = [audit.table.item(row, 3).text() for row in range(audit.table.rowCount())]
    audit.select_row(rows.index("scroll"))
    audit.details_tabs.setCurrentIndex(3)  # the rendered views the agent received
    audit.table.resizeColumnsToContents()
    pump(lambda: True)
    window.grab().save(str(out / "medopenclaw_panel.png"))
    server.server_button.click()
    audit.detach()


def medcopilot_panel(session: AppSession, out: Path) -> None:
    model = ScriptedModel([
        ("I will move to the slice with the bright focus and record it as a key slice.",
         [("set_slice_offset", {"view": "axial", "offset": -2.0, "size": 128}),
          ("record_key_slices", {"axial_mm": -2.0, "label": "lesion level"})]),
        ("There is a bright, well-circumscribed focus in the right hemisphere at axial S=-2 mm [ev3]. "
         "It is most likely a benign lesion.", []),
        ("Let me also measure it.", [("measure_line", {"view": "axial", "start_1000": [380, 430],
                                                      "end_1000": [560, 610]})]),
    ])
    store = DictSettingsStore({"MedCopilot/model": "local-vlm", "MedCopilot/base_url": "http://127.0.0.1:8000/v1"})
    panel = CopilotPanel(store, provider_factory=lambda config: model)
    panel.attach(session.registry)
    panel.widget.resize(620, 1100)
    panel.widget.setWindowTitle("MedCopilot")
    panel.widget.show()
    panel.input_edit.setText("Is there a lesion on this FLAIR? Show me where.")
    panel.send_button.click()
    pump(lambda: panel.session.state == "awaiting_approval")
    for card in panel.session.queue.pending():
        panel.session.approve(card.id)
    pump(lambda: panel.session.state == "idle")
    panel.input_edit.setText("How large is it?")
    panel.send_button.click()
    pump(lambda: panel.session.state == "awaiting_approval")
    pump(lambda: True)
    panel.widget.grab().save(str(out / "medcopilot_panel.png"))
    panel.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    start_qt_application()
    with tempfile.TemporaryDirectory() as directory:
        registry = open_slicer_session(Path(directory))
        session = AppSession(registry)
        registry.call("bookmark_view", {"view": "axial", "label": "baseline"}, actor="human")
        medopenclaw_panel(session, args.out)
        medcopilot_panel(session, args.out)
        session.stop_server()
        registry.context.engine.app.close()
    print(f"wrote {args.out / 'medopenclaw_panel.png'} and {args.out / 'medcopilot_panel.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

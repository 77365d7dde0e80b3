"""The MedCopilot chat panel as a real Qt widget (PySide6, offscreen) with a fake OpenAI-compatible server on
127.0.0.1: settings, send, proposal card buttons, rendered results, the linked answer and evidence jumps."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from agents_fakes import FakeModelServer, Scripted, openai_reply  # noqa: E402
from gui_helpers import pump  # noqa: E402

from MedCopilotLib.panel import CopilotPanel  # noqa: E402
from MedCopilotLib.settings import DictSettingsStore  # noqa: E402
from MedOpenClawLib.gui.qt_compat import qt, read  # noqa: E402


@pytest.fixture
def registry(qt_application, slicer_session):
    return slicer_session


@pytest.fixture
def new_panel():
    """Makes panels and closes each at teardown, the test passed or not: a panel left open keeps its model process
    and timer running into the next test."""
    panels: list[CopilotPanel] = []

    def make(store: DictSettingsStore) -> CopilotPanel:
        panels.append(CopilotPanel(store))
        return panels[-1]

    yield make
    for panel in panels:
        panel.close()


def buttons(panel, text):
    return [b for b in panel.conversation_widget.findChildren(qt.QPushButton) if b.text() == text]


def test_chat_panel_approve_card_answer_and_evidence_jump(registry, new_panel, monkeypatch):
    monkeypatch.delenv("MEDOPENCLAW_API_KEY", raising=False)
    script = [
        Scripted(openai_reply("Going to the lesion level.", [
            ("set_slice_offset", '{"view": "axial", "offset": 4.0, "size": 64}'),
            ("record_key_slices", '{"axial_mm": 4.0, "label": "lesion"}'),
        ])),
        Scripted(openai_reply("Lesion on axial S=4 mm [ev1].")),
    ]
    store = DictSettingsStore()
    with FakeModelServer(script) as server:
        panel = new_panel(store)
        panel.attach(registry)
        panel.input_edit.setText("find the lesion")
        panel.send_button.click()
        assert "Set the model first" in read(panel.settings_label, "text") and not server.requests

        panel.endpoint_edit.setText(server.url)
        panel.model_edit.setText("fake-vlm")
        panel.key_edit.setText("sk-panel-secret")
        panel.remember_check.setChecked(False)
        assert panel.apply_settings()
        assert store.value("MedCopilot/model") == "fake-vlm" and store.value("MedCopilot/api_key") is None
        assert panel.session.worker._process.poll() is None  # its model process starts before the question
        panel.send_button.click()
        assert read(panel.input_edit, "text") == "" and read(panel.status_label, "text") == "Thinking…"
        pump(lambda: len(buttons(panel, "Approve")) == 2)
        assert read(panel.status_label, "text") == "Waiting for your decision"
        for button in buttons(panel, "Approve"):
            button.click()
        pump(lambda: panel.session.state == "idle" and panel.session.conversation.entries[-1].kind == "answer")
        assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-panel-secret"

    assert panel.evidence_list.count() == 1
    assert panel.evidence_list.item(0).text().startswith("ev1 — record_key_slices")
    assert not any(b.isVisible() for b in buttons(panel, "Approve"))
    labels = [read(label, "text") for label in panel.conversation_widget.findChildren(qt.QLabel)]
    assert any(text.startswith("approved") and "ran successfully" in text for text in labels)
    assert sum(1 for label in panel.conversation_widget.findChildren(qt.QLabel)
               if label.pixmap() is not None and not label.pixmap().isNull()) >= 1  # the render came back

    registry.call("set_slice_offset", {"view": "axial", "offset": -6.0, "size": 64}, actor="human")
    buttons(panel, "ev1")[0].click()  # the claim's evidence link
    assert registry.context.state()["views"]["axial"]["offset_mm"] == pytest.approx(4.0)
    registry.call("set_slice_offset", {"view": "axial", "offset": -6.0, "size": 64}, actor="human")
    panel.jump_to_item(panel.evidence_list.item(0))
    assert registry.context.state()["views"]["axial"]["offset_mm"] == pytest.approx(4.0)
    assert read(panel.status_label, "text") == "Showing the view of ev1"


def test_model_text_is_shown_as_plain_text_never_as_html(registry, new_panel, monkeypatch):
    """A reply must not be able to hide or restyle the arguments the clinician approves (Qt labels would
    otherwise guess rich text from any tag-like content)."""
    monkeypatch.delenv("MEDOPENCLAW_API_KEY", raising=False)
    hidden = "<span style='font-size:0px'>/elsewhere</span>"
    script = [
        Scripted(openai_reply("<b>Trust me</b>", [("bookmark_view", f'{{"view": "axial", "label": "{hidden}"}}')])),
    ]
    with FakeModelServer(script) as server:
        panel = new_panel(DictSettingsStore())
        panel.attach(registry)
        panel.endpoint_edit.setText(server.url)
        panel.model_edit.setText("fake-vlm")
        assert panel.apply_settings()
        panel.input_edit.setText("bookmark")
        panel.send_button.click()
        pump(lambda: len(buttons(panel, "Approve")) == 1)
    labels = {read(label, "text"): label for label in panel.conversation_widget.findChildren(qt.QLabel)}
    shown = [text for text in labels if hidden in text or text == "<b>Trust me</b>"]
    assert len(shown) == 2
    assert all(labels[text].textFormat() == qt.Qt.PlainText for text in shown)

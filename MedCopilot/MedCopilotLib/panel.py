"""The MedCopilot chat panel: conversation with proposal cards, evidence list, settings. Qt binding only.

Behaviour lives in :class:`.session.CopilotSession`; this module renders its conversation entries, forwards
clicks, and polls the model call (a child process: :mod:`.worker`) from a ``QTimer`` so the GUI never waits on the
network.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable

from MedOpenClawLib.core.registry import ActionRegistry
from MedOpenClawLib.gui.qt_compat import pixmap_from_png, qt, read
from MedOpenClawLib.gui.view_restore import restore_view
from MedOpenClawLib.providers import ProviderConfig, make_provider

from .approvals import Decision, ProposalCard
from .conversation import Entry
from .session import AWAITING_APPROVAL, THINKING, CopilotBusy, CopilotSession
from .settings import PROVIDERS, CopilotSettings, SettingsStore, load_settings, save_settings

POLL_INTERVAL_MS = 50
THUMBNAIL_PX = 128
STYLES = {
    "user": "background:#dbeafe; border-radius:6px; padding:6px;",
    "assistant": "background:#f1f5f9; border-radius:6px; padding:6px;",
    "notice": "color:#475569; font-style:italic;",
    "error": "color:#b3261e;",
    "ok": "color:#166534;",
    "card": "QFrame#card { border:1px solid #94a3b8; border-radius:6px; background:#fffbeb; }",
    "answer": "QFrame#answer { border:1px solid #166534; border-radius:6px; background:#f0fdf4; }",
}
STATUS_TEXT = {THINKING: "Thinking…", AWAITING_APPROVAL: "Waiting for your decision", "idle": "Ready"}


class CopilotPanel:
    def __init__(self, store: SettingsStore, parent=None,
                 provider_factory: Callable[[ProviderConfig], object] = make_provider):
        """``provider_factory`` turns the settings into a model client (scripted sessions pass their own)."""
        self.store = store
        self.provider_factory = provider_factory
        self.settings: CopilotSettings = load_settings(store)
        self.registry: ActionRegistry | None = None
        self.session: CopilotSession | None = None
        self._rendered = 0
        self._cards: dict[str, dict] = {}
        self.widget = qt.QWidget(parent)
        layout = qt.QVBoxLayout(self.widget)
        layout.addWidget(self._build_settings())

        self.conversation_widget = qt.QWidget()
        self.conversation_layout = qt.QVBoxLayout(self.conversation_widget)
        self.conversation_layout.addStretch(1)
        self.scroll = qt.QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setWidget(self.conversation_widget)
        layout.addWidget(self.scroll, 4)

        layout.addWidget(qt.QLabel("Evidence (click to show the view it was captured in):"))
        self.evidence_list = qt.QListWidget()
        self.evidence_list.setMaximumHeight(90)
        layout.addWidget(self.evidence_list, 1)

        controls = qt.QHBoxLayout()
        self.auto_check = qt.QCheckBox("Auto-approve actions")
        self.auto_check.setToolTip("Run the copilot's proposed actions without asking (every action is still audited)")
        self.stop_button = qt.QPushButton("Stop")
        self.status_label = qt.QLabel(STATUS_TEXT["idle"])
        controls.addWidget(self.auto_check)
        controls.addWidget(self.stop_button)
        controls.addWidget(self.status_label, 1)
        layout.addLayout(controls)
        inputs = qt.QHBoxLayout()
        self.input_edit = qt.QLineEdit()
        self.input_edit.setPlaceholderText("Ask about the study, e.g. 'Find and bookmark the lesion'")
        self.send_button = qt.QPushButton("Send")
        inputs.addWidget(self.input_edit, 1)
        inputs.addWidget(self.send_button)
        layout.addLayout(inputs)

        self.send_button.clicked.connect(self.send)
        self.input_edit.returnPressed.connect(self.send)
        self.stop_button.clicked.connect(self.stop)
        self.auto_check.toggled.connect(self.set_auto)
        self.evidence_list.itemClicked.connect(self.jump_to_item)
        self.timer = qt.QTimer()
        self.timer.setInterval(POLL_INTERVAL_MS)
        self.timer.timeout.connect(self.poll)

    # --------------------------------------------------------------------------------------- settings
    def _build_settings(self):
        box = qt.QGroupBox("Model")
        form = qt.QFormLayout(box)
        self.provider_combo = qt.QComboBox()
        for provider in PROVIDERS:
            self.provider_combo.addItem(provider)
        self.endpoint_edit = qt.QLineEdit()
        self.model_edit = qt.QLineEdit()
        self.key_edit = qt.QLineEdit()
        self.key_edit.setEchoMode(qt.QLineEdit.Password)
        self.remember_check = qt.QCheckBox("Remember the key in Slicer settings")
        self.apply_button = qt.QPushButton("Apply")
        self.settings_label = qt.QLabel("")
        self.settings_label.setWordWrap(True)
        form.addRow("Provider:", self.provider_combo)
        form.addRow("Endpoint:", self.endpoint_edit)
        form.addRow("Model:", self.model_edit)
        form.addRow("API key:", self.key_edit)
        form.addRow(self.remember_check, self.apply_button)
        form.addRow(self.settings_label)
        self.apply_button.clicked.connect(self.apply_settings)
        self._show_settings()
        return box

    def _show_settings(self) -> None:
        self.provider_combo.setCurrentIndex(max(0, list(PROVIDERS).index(self.settings.provider)
                                                if self.settings.provider in PROVIDERS else 0))
        self.endpoint_edit.setText(self.settings.base_url)
        self.model_edit.setText(self.settings.model)
        self.key_edit.setText("")
        self.key_edit.setPlaceholderText({"environment": "from MEDOPENCLAW_API_KEY", "settings": "saved key",
                                          "entered": "entered key"}.get(self.settings.key_source, "none"))
        self.remember_check.setChecked(self.settings.key_source == "settings")

    def apply_settings(self) -> bool:
        typed_key = read(self.key_edit, "text").strip()
        settings = CopilotSettings(
            base_url=read(self.endpoint_edit, "text").strip(),
            model=read(self.model_edit, "text").strip(),
            provider=read(self.provider_combo, "currentText"),
            api_key=typed_key or self.settings.api_key,
            key_source="entered" if typed_key else self.settings.key_source,
            timeout_s=self.settings.timeout_s,
        )
        problems = settings.validate()
        if problems:
            self.settings_label.setText("; ".join(problems))
            return False
        self.settings = settings
        save_settings(settings, self.store, remember_key=read(self.remember_check, "checked"))
        self._show_settings()
        self.settings_label.setText(f"{settings.provider} · {settings.model} · key {settings.describe()['api_key']}")
        if self.session is not None:
            self.session.set_model(self.provider_factory(settings.provider_config()), [settings.api_key])
        elif self.registry is not None:
            self._ensure_session()  # its model process starts now, not at the first question
        return True

    # --------------------------------------------------------------------------------------- session
    def attach(self, registry: ActionRegistry) -> None:
        """Bind to the shared MedOpenClaw session's registry; a new registry starts a new conversation."""
        if self.session is not None:
            self.session.close()
        self.registry = registry
        self.session = None
        self._clear_conversation()
        self.timer.start()
        if not self.settings.validate():
            self._ensure_session()  # saved settings: the model process starts before the first question

    def _ensure_session(self) -> CopilotSession | None:
        if self.session is not None:
            return self.session
        if self.registry is None:
            self.status_label.setText("No MedOpenClaw session: open the MedOpenClaw module first")
            return None
        problems = self.settings.validate()
        if problems:
            self.settings_label.setText("Set the model first: " + "; ".join(problems))
            return None
        registry = self.registry
        self.session = CopilotSession(
            registry,
            self.provider_factory(self.settings.provider_config()),
            restore_view=lambda seq: restore_view(registry, registry.trace.records[seq]),
            auto_mode=read(self.auto_check, "checked"),
            secrets=[self.settings.api_key],
        )
        self.session.add_listener(self.render)
        return self.session

    def send(self) -> None:
        text = read(self.input_edit, "text")
        session = self._ensure_session()
        if session is None:
            return
        try:
            session.send(text)
        except (CopilotBusy, ValueError) as error:
            self.status_label.setText(str(error))
            return
        self.input_edit.setText("")

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()

    def close(self) -> None:
        """Leave the panel: the running call is dropped, the model process ends, the timer stops."""
        self.timer.stop()
        if self.session is not None:
            self.session.close()

    def set_auto(self, enabled: bool) -> None:
        if self.session is not None:
            self.session.set_auto_mode(enabled)

    def poll(self) -> None:
        if self.session is None:
            return
        if not self.session.poll() and self.session.evidence.refresh():
            self.render()  # evidence captured by the clinician or a REST client

    def jump_to_item(self, item) -> None:
        ref = item.data(qt.Qt.UserRole)
        self.jump_to(ref)

    def jump_to(self, ref: str) -> None:
        result = self.session.jump_to_evidence(ref)
        self.status_label.setText(f"Showing the view of {ref}" if result.ok else result.error["message"])

    # --------------------------------------------------------------------------------------- rendering
    def _clear_conversation(self) -> None:
        while self.conversation_layout.count() > 1:
            self.conversation_layout.takeAt(0).widget().deleteLater()
        self._rendered = 0
        self._cards = {}
        self.evidence_list.clear()

    def render(self) -> None:
        """Add widgets for new entries, refresh the cards and evidence list, show the state."""
        session = self.session
        for entry in session.conversation.entries[self._rendered:]:
            self.conversation_layout.insertWidget(self.conversation_layout.count() - 1, self._entry_widget(entry))
        self._rendered = len(session.conversation.entries)
        for card_id, widgets in self._cards.items():
            self._update_card(session.queue.cards[card_id], widgets)
        if read(self.evidence_list, "count") != len(session.evidence.items):
            self.evidence_list.clear()
            for item in session.evidence.items:
                row = qt.QListWidgetItem(f"{item.ref} — {item.summary}")
                row.setData(qt.Qt.UserRole, item.ref)
                self.evidence_list.addItem(row)
        self.status_label.setText(STATUS_TEXT.get(session.state, session.state))
        self.send_button.setEnabled(session.state == "idle")
        bar = self.scroll.verticalScrollBar()
        bar.setValue(read(bar, "maximum"))

    def _label(self, text: str, style: str, rich: bool = False):
        """A wrapped, selectable label. Plain text unless ``rich``: model-written text (replies, arguments,
        claims) must never be interpreted as HTML, or a reply could hide or restyle what the clinician approves."""
        label = qt.QLabel(text)
        label.setTextFormat(qt.Qt.RichText if rich else qt.Qt.PlainText)
        label.setWordWrap(True)
        label.setTextInteractionFlags(qt.Qt.TextSelectableByMouse)
        label.setStyleSheet(style)
        return label

    def _entry_widget(self, entry: Entry):
        if entry.kind == "user":
            return self._label(entry.text, STYLES["user"])
        if entry.kind == "assistant":
            return self._label(entry.text, STYLES["assistant"])
        if entry.kind == "notice":
            return self._label(entry.text, STYLES["notice" if entry.ok else "error"])
        if entry.kind == "proposal":
            return self._card_widget(self.session.queue.cards[entry.card_id])
        if entry.kind == "result":
            return self._result_widget(entry)
        return self._answer_widget(entry)

    def _card_widget(self, card: ProposalCard):
        frame = qt.QFrame()
        frame.setObjectName("card")  # the style must not reach the labels (QLabel is a QFrame too)
        frame.setStyleSheet(STYLES["card"])
        layout = qt.QVBoxLayout(frame)
        layout.addWidget(self._label(f"<b>{card.id} · {html.escape(card.call.name)}</b>", "", rich=True))
        arguments = json.dumps(card.call.arguments) if card.call.arguments is not None else card.call.raw_arguments
        layout.addWidget(self._label(arguments, "font-family:monospace;"))
        if card.rationale:
            frame.setToolTip(card.rationale)
        buttons = qt.QHBoxLayout()
        approve, reject = qt.QPushButton("Approve"), qt.QPushButton("Reject")
        reason = qt.QLineEdit()
        reason.setPlaceholderText("reason for rejecting (optional)")
        buttons.addWidget(approve)
        buttons.addWidget(reject)
        buttons.addWidget(reason, 1)
        layout.addLayout(buttons)
        decision = self._label("", "")
        layout.addWidget(decision)
        approve.clicked.connect(lambda: self._decide(card.id, True, ""))
        reject.clicked.connect(lambda: self._decide(card.id, False, read(reason, "text")))
        widgets = {"approve": approve, "reject": reject, "reason": reason, "decision": decision}
        self._cards[card.id] = widgets
        self._update_card(card, widgets)
        return frame

    def _update_card(self, card: ProposalCard, widgets: dict) -> None:
        open_card = card.decision is Decision.PENDING
        for name in ("approve", "reject", "reason"):
            widgets[name].setVisible(open_card)
        if open_card:
            widgets["decision"].setText("Waiting for your decision")
            return
        text = card.decision.value + (f": {card.reason}" if card.reason else "")
        if card.handled and card.ok is not None and card.decision is not Decision.REJECTED:
            text += " · ran " + ("successfully" if card.ok else "with an error")
        widgets["decision"].setText(text)
        widgets["decision"].setStyleSheet(STYLES["error" if card.decision is Decision.REJECTED else "ok"])

    def _decide(self, card_id: str, approve: bool, reason: str) -> None:
        try:
            if approve:
                self.session.approve(card_id)
            else:
                self.session.reject(card_id, reason)
        except ValueError as error:
            self.status_label.setText(str(error))

    def _result_widget(self, entry: Entry):
        box = qt.QWidget()
        layout = qt.QVBoxLayout(box)
        layout.addWidget(self._label(entry.text, STYLES["ok" if entry.ok else "error"]))
        if entry.images:
            row = qt.QHBoxLayout()
            for data in entry.images:
                image = qt.QLabel()
                image.setPixmap(pixmap_from_png(data).scaled(THUMBNAIL_PX, THUMBNAIL_PX, qt.Qt.KeepAspectRatio,
                                                              qt.Qt.SmoothTransformation))
                row.addWidget(image)
            row.addStretch(1)
            layout.addLayout(row)
        return box

    def _answer_widget(self, entry: Entry):
        frame = qt.QFrame()
        frame.setObjectName("answer")
        frame.setStyleSheet(STYLES["answer"])
        layout = qt.QVBoxLayout(frame)
        layout.addWidget(self._label("<b>Answer</b>", "", rich=True))
        for claim in entry.data.get("claims", []):
            row = qt.QHBoxLayout()
            marker = "" if claim["supported"] else "⚠ "
            row.addWidget(self._label(marker + claim["text"], "" if claim["supported"] else STYLES["error"]), 1)
            for ref in claim["refs"]:
                link = qt.QPushButton(ref)
                link.setToolTip("Show the view this evidence was captured in")
                link.clicked.connect(lambda _checked=False, ref=ref: self.jump_to(ref))
                row.addWidget(link)
            if claim["unknown_refs"]:
                row.addWidget(self._label("unknown: " + ", ".join(claim["unknown_refs"]), STYLES["error"]))
            if not claim["refs"] and not claim["unknown_refs"]:
                row.addWidget(self._label("no evidence cited", STYLES["error"]))
            layout.addLayout(row)
        return frame

"""Server and session controls of the MedOpenClaw panel: REST start/stop (localhost only, bearer token),
track, data roots and round budget. Changing the track starts a new session (a new trace), since the track
decides which actions the registry holds; roots and budget change the running session and are audited."""

from __future__ import annotations

from collections.abc import Callable

from .app_session import AppSession
from .qt_compat import qt, read

DEFAULT_PORT = 8765


class ServerControlsPanel:
    def __init__(self, new_session: Callable[[str, list[str], int | None], AppSession], parent=None):
        """``new_session(track, data_roots, max_rounds)`` builds and shares a session (the module logic)."""
        self.new_session = new_session
        self.session: AppSession | None = None
        self.widget = qt.QWidget(parent)
        form = qt.QFormLayout(self.widget)

        self.track_combo = qt.QComboBox()
        self.track_combo.addItem("A")
        self.track_combo.addItem("B")
        self.track_combo.setToolTip("Track A: viewer and evidence actions. Track B adds analysis operators.")
        form.addRow("Track:", self.track_combo)

        self.roots_list = qt.QListWidget()
        self.roots_list.setMaximumHeight(70)
        roots_buttons = qt.QHBoxLayout()
        self.add_root_button = qt.QPushButton("Add folder…")
        self.remove_root_button = qt.QPushButton("Remove")
        roots_buttons.addWidget(self.add_root_button)
        roots_buttons.addWidget(self.remove_root_button)
        roots_box = qt.QVBoxLayout()
        roots_box.addWidget(self.roots_list)
        roots_box.addLayout(roots_buttons)
        form.addRow("Data roots:", roots_box)

        self.budget_spin = qt.QSpinBox()
        self.budget_spin.setRange(0, 1000)
        self.budget_spin.setSpecialValueText("unlimited")
        self.budget_spin.setToolTip("Tool-calling rounds an agent may use in this session")
        form.addRow("Round budget:", self.budget_spin)

        self.port_spin = qt.QSpinBox()
        self.port_spin.setRange(0, 65535)
        self.port_spin.setValue(DEFAULT_PORT)
        self.port_spin.setSpecialValueText("any free port")
        self.server_button = qt.QPushButton("Start server")
        self.server_button.setCheckable(True)
        port_row = qt.QHBoxLayout()
        port_row.addWidget(self.port_spin)
        port_row.addWidget(self.server_button)
        form.addRow("Port (127.0.0.1):", port_row)

        self.url_label = qt.QLabel("stopped")
        self.url_label.setTextInteractionFlags(qt.Qt.TextSelectableByMouse)
        form.addRow("REST:", self.url_label)
        self.token_edit = qt.QLineEdit()
        self.token_edit.setReadOnly(True)
        self.token_edit.setEchoMode(qt.QLineEdit.Password)
        self.copy_token_button = qt.QPushButton("Copy token")
        token_row = qt.QHBoxLayout()
        token_row.addWidget(self.token_edit)
        token_row.addWidget(self.copy_token_button)
        form.addRow("Bearer token:", token_row)
        self.status_label = qt.QLabel("")
        self.status_label.setWordWrap(True)
        form.addRow(self.status_label)

        self.track_combo.currentIndexChanged.connect(self.change_track)
        self.add_root_button.clicked.connect(self.choose_root)
        self.remove_root_button.clicked.connect(self.remove_selected_root)
        self.budget_spin.valueChanged.connect(self.change_budget)
        self.server_button.toggled.connect(self.toggle_server)
        self.copy_token_button.clicked.connect(self.copy_token)

    def attach(self, session: AppSession) -> None:
        """Show ``session``'s settings without writing them back (signals are blocked while filling)."""
        self.session = session
        policy = session.policy
        for widget in (self.track_combo, self.budget_spin, self.server_button):
            widget.blockSignals(True)
        self.track_combo.setCurrentIndex(0 if policy.track == "A" else 1)
        self.budget_spin.setValue(policy.max_rounds or 0)
        self.server_button.setChecked(session.serving)
        for widget in (self.track_combo, self.budget_spin, self.server_button):
            widget.blockSignals(False)
        self.roots_list.clear()
        for root in policy.data_roots.to_json():
            self.roots_list.addItem(root)
        self.token_edit.setText(session.token)
        self._show_server_state()

    def roots(self) -> list[str]:
        return [self.roots_list.item(index).text() for index in range(read(self.roots_list, "count"))]

    def change_track(self, *_args) -> None:
        if self.session is None:
            return
        track = read(self.track_combo, "currentText")
        if track == self.session.policy.track:
            return
        budget = read(self.budget_spin, "value") or None
        self.new_session(track, self.roots(), budget)
        self.status_label.setText(f"Started a new session on track {track} (new audit trace)")

    def add_root(self, path: str) -> None:
        if not path or path in self.roots() or self.session is None:
            return
        try:
            self.session.set_data_roots([*self.roots(), path])
        except ValueError as error:
            self.status_label.setText(str(error))
            return
        self.roots_list.addItem(path)

    def choose_root(self) -> None:
        self.add_root(qt.QFileDialog.getExistingDirectory(self.widget, "Folder the agent may open cases from"))

    def remove_selected_root(self) -> None:
        row = read(self.roots_list, "currentRow")
        if row < 0 or self.session is None:
            return
        remaining = [root for index, root in enumerate(self.roots()) if index != row]
        self.session.set_data_roots(remaining)
        self.roots_list.takeItem(row)

    def change_budget(self, value: int) -> None:
        if self.session is not None:
            self.session.set_budget(value or None)

    def toggle_server(self, checked: bool) -> None:
        if self.session is None:
            return
        if checked:
            try:
                self.session.start_server(read(self.port_spin, "value"))
            except OSError as error:
                self.server_button.blockSignals(True)
                self.server_button.setChecked(False)
                self.server_button.blockSignals(False)
                self.status_label.setText(f"Cannot listen on that port: {error}")
        else:
            self.session.stop_server()
        self._show_server_state()

    def _show_server_state(self) -> None:
        serving = self.session is not None and self.session.serving
        self.server_button.setText("Stop server" if serving else "Start server")
        self.url_label.setText(self.session.server.url if serving else "stopped")
        self.port_spin.setEnabled(not serving)
        if serving:
            self.status_label.setText("Serving the registry to local clients only; no route runs code.")

    def copy_token(self) -> None:
        if self.session is not None:
            qt.QApplication.clipboard().setText(self.session.token)
            self.status_label.setText("Token copied to the clipboard")

"""The audit-log panel: a live table of the session trace, a filter, record details and trace tools.

Only binding lives here; rows, filtering and details come from :class:`.audit_table.AuditTableModel`, restores
from :mod:`.view_restore` and export/verify/replay from :mod:`.trace_tools`.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import trace_tools
from .app_session import AppSession
from .audit_table import ALL, COLUMNS, AuditFilter, AuditTableModel, LiveAuditFeed
from .qt_compat import qt, read
from .view_restore import restore_view

POLL_INTERVAL_MS = 200
THUMBNAIL_PX = 160
ERROR_COLOR = "#b3261e"


class AuditLogPanel:
    """``widget`` is the panel; :meth:`attach` binds it to a session (again whenever the session changes)."""

    def __init__(self, parent=None):
        self.session: AppSession | None = None
        self.feed: LiveAuditFeed | None = None
        self.model = AuditTableModel()
        self.widget = qt.QWidget(parent)
        layout = qt.QVBoxLayout(self.widget)

        filters = qt.QHBoxLayout()
        self.filter_edit = qt.QLineEdit()
        self.filter_edit.setPlaceholderText("Filter: action, arguments or error text")
        self.actor_combo = qt.QComboBox()
        self.status_combo = qt.QComboBox()
        for combo, values in ((self.actor_combo, ("agent", "human", "system")), (self.status_combo, ("ok", "error"))):
            combo.addItem("all")
            for value in values:
                combo.addItem(value)
        self.actions_only = qt.QCheckBox("Actions only")
        for widget in (self.filter_edit, self.actor_combo, self.status_combo, self.actions_only):
            filters.addWidget(widget)
        layout.addLayout(filters)

        self.table = qt.QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels([column.capitalize() for column in COLUMNS])
        self.table.setSelectionBehavior(qt.QAbstractItemView.SelectRows)
        self.table.setSelectionMode(qt.QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(qt.QAbstractItemView.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setStretchLastSection(True)
        layout.addWidget(self.table, 3)

        self.details_title = qt.QLabel("Select a record to see its details")
        self.details_title.setTextFormat(qt.Qt.PlainText)  # it quotes client-sent names and messages: never HTML
        layout.addWidget(self.details_title)
        self.details_tabs = qt.QTabWidget()
        self.arguments_text, self.result_text, self.state_text = (self._text_tab(name)
                                                                  for name in ("Arguments", "Result", "State"))
        views = qt.QWidget()
        self.views_layout = qt.QHBoxLayout(views)
        self.details_tabs.addTab(views, "Views")
        layout.addWidget(self.details_tabs, 2)

        buttons = qt.QHBoxLayout()
        self.restore_button = qt.QPushButton("Restore this view")
        self.restore_button.setEnabled(False)
        self.export_button = qt.QPushButton("Export trace…")
        self.verify_button = qt.QPushButton("Verify trace")
        self.replay_button = qt.QPushButton("Replay trace")
        for button in (self.restore_button, self.export_button, self.verify_button, self.replay_button):
            buttons.addWidget(button)
        layout.addLayout(buttons)
        self.status_label = qt.QLabel("")
        self.status_label.setWordWrap(True)
        layout.addWidget(self.status_label)

        self.filter_edit.textChanged.connect(self.apply_filter)
        self.actor_combo.currentIndexChanged.connect(self.apply_filter)
        self.status_combo.currentIndexChanged.connect(self.apply_filter)
        self.actions_only.toggled.connect(self.apply_filter)
        self.table.itemSelectionChanged.connect(self.show_selected)
        self.restore_button.clicked.connect(self.restore_selected)
        self.export_button.clicked.connect(self.choose_export_path)
        self.verify_button.clicked.connect(self.verify_trace)
        self.replay_button.clicked.connect(self.replay_trace)
        self.timer = qt.QTimer()
        self.timer.setInterval(POLL_INTERVAL_MS)
        self.timer.timeout.connect(self.refresh)

    def _text_tab(self, name: str):
        text = qt.QPlainTextEdit()
        text.setReadOnly(True)
        self.details_tabs.addTab(text, name)
        return text

    # ------------------------------------------------------------------------------------------ binding
    def attach(self, session: AppSession) -> None:
        if self.feed is not None:
            self.feed.close()
        self.session = session
        self.feed = LiveAuditFeed(session.trace)
        self.model.reset([], session.trace.path.parent if session.trace.path else None)
        self.table.setRowCount(0)
        self.refresh()
        self.timer.start()

    def detach(self) -> None:
        self.timer.stop()
        if self.feed is not None:
            self.feed.close()
            self.feed = None

    def refresh(self) -> None:
        """Append the records written since the last poll (rows matching the filter only)."""
        if self.feed is None:
            return
        for row in self.model.extend(self.feed.drain()):
            self._append_row(row)

    def _append_row(self, row) -> None:
        index = read(self.table, "rowCount")
        self.table.insertRow(index)
        for column, text in enumerate(row.cells):
            item = qt.QTableWidgetItem(text)
            item.setToolTip(text)
            if row.status == "error":
                item.setForeground(qt.QBrush(qt.QColor(ERROR_COLOR)))
            self.table.setItem(index, column, item)

    def apply_filter(self, *_args) -> None:
        actor, status = read(self.actor_combo, "currentText"), read(self.status_combo, "currentText")
        self.model.set_filter(AuditFilter(
            text=read(self.filter_edit, "text"),
            actor=ALL if actor == "all" else actor,
            status=ALL if status == "all" else status,
            include_events=not read(self.actions_only, "checked"),
        ))
        self.table.setRowCount(0)
        for row in self.model.rows():
            self._append_row(row)
        self.show_selected()

    # ------------------------------------------------------------------------------------------ details
    def selected_record(self) -> dict | None:
        row = self.table.currentRow()
        return self.model.record_at(row) if 0 <= row < len(self.model) and self.table.selectedItems() else None

    def select_row(self, row: int) -> None:
        self.table.selectRow(row)

    def show_selected(self) -> None:
        record = self.selected_record()
        self._clear_views()
        if record is None:
            self.details_title.setText("Select a record to see its details")
            for text in (self.arguments_text, self.result_text, self.state_text):
                text.setPlainText("")
            self.restore_button.setEnabled(False)
            return
        details = self.model.details(record["seq"])
        title = details.title + (f" — {details.error}" if details.error else "")
        self.details_title.setText(title)
        self.arguments_text.setPlainText(details.arguments_json)
        self.result_text.setPlainText(details.result_json)
        self.state_text.setPlainText(details.state_json)
        for image in details.images:
            label = qt.QLabel()
            if image.path is not None:
                label.setPixmap(qt.QPixmap(str(image.path)).scaled(
                    THUMBNAIL_PX, THUMBNAIL_PX, qt.Qt.KeepAspectRatio, qt.Qt.SmoothTransformation))
            label.setToolTip(image.caption)
            caption = qt.QLabel(image.caption)
            box = qt.QVBoxLayout()
            box.addWidget(label)
            box.addWidget(caption)
            self.views_layout.addLayout(box)
        self.restore_button.setEnabled(details.restorable and self.session is not None)

    def _clear_views(self) -> None:
        while self.views_layout.count():
            box = self.views_layout.takeAt(0).layout()
            while box is not None and box.count():
                box.takeAt(0).widget().deleteLater()

    # ------------------------------------------------------------------------------------------ actions
    def restore_selected(self) -> None:
        record = self.selected_record()
        if record is None or self.session is None:
            return
        try:
            outcome = restore_view(self.session.registry, record)
        except ValueError as error:
            self.status_label.setText(str(error))
            return
        self.status_label.setText(outcome.summary())
        self.refresh()

    def choose_export_path(self) -> None:
        if self.session is None or self.session.trace.path is None:
            return
        default = str(self.session.trace.path.with_suffix(".zip"))
        path = qt.QFileDialog.getSaveFileName(self.widget, "Export audit trace", default, "Zip archives (*.zip)")
        path = path[0] if isinstance(path, tuple) else path  # PySide returns (path, filter), PythonQt the path
        if path:
            self.export_to(path)

    def export_to(self, path: str | os.PathLike) -> Path | None:
        try:
            archive = trace_tools.export_trace(self.session.trace.path, path)
        except (OSError, ValueError) as error:
            self.status_label.setText(f"Export failed: {error}")
            return None
        count = len(trace_tools.referenced_files(self.session.trace.path))
        self.status_label.setText(f"Exported the trace and its {count} artifacts to {archive}")
        return archive

    def verify_trace(self) -> None:
        if self.session is None or self.session.trace.path is None:
            return
        report = trace_tools.verify(self.session.trace.path)
        verdict = "intact" if report.ok else f"BROKEN at record #{report.first_bad_seq}"
        self.status_label.setText(f"Trace {verdict}: {report.message}")

    def replay_trace(self) -> None:
        if self.session is None or self.session.trace.path is None:
            return
        try:
            report = trace_tools.replay(self.session.trace.path, self.session.policy.data_roots.to_json())
        except (RuntimeError, ValueError) as error:
            self.status_label.setText(str(error))
            return
        self.status_label.setText(("Replay matches: " if report.ok else "Replay differs: ") + report.message)

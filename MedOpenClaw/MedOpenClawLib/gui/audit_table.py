"""The audit-log table behind the MedOpenClaw panel: rows, filtering and record details, without Qt.

Records are the dictionaries of :class:`MedOpenClawLib.core.audit.AuditTrace` (live) or of a trace file read back
(:func:`MedOpenClawLib.core.audit.read_trace`). The Qt table only shows :meth:`AuditTableModel.rows`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from ..core.audit import AuditTrace, state_at

COLUMNS = ("seq", "time", "actor", "action", "arguments", "status", "duration")
ARGUMENTS_PREVIEW_CHARS = 80
ALL = ""


@dataclass(frozen=True)
class AuditFilter:
    """What the user typed and picked: ``text`` matches action, arguments and error message (any case)."""

    text: str = ""
    actor: str = ALL
    status: str = ALL
    include_events: bool = True

    def matches(self, record: dict) -> bool:
        if not self.include_events and record.get("kind") != "action":
            return False
        if self.actor and record.get("actor") != self.actor:
            return False
        if self.status and record_status(record) != self.status:
            return False
        needle = self.text.strip().lower()
        return not needle or needle in searchable_text(record)


@dataclass(frozen=True)
class AuditRow:
    seq: int
    cells: tuple[str, ...]
    status: str
    actor: str


@dataclass
class ImageRef:
    view: str
    caption: str
    path: Path | None


@dataclass
class RecordDetails:
    """Everything the details pane shows for one record."""

    seq: int
    title: str
    status: str
    error: str
    arguments_json: str
    result_json: str
    state_json: str
    images: list[ImageRef] = field(default_factory=list)
    restorable: bool = False


def record_label(record: dict) -> str:
    return record.get("action") or record.get("kind", "")


def record_status(record: dict) -> str:
    return record.get("status") or record.get("kind", "")


def searchable_text(record: dict) -> str:
    error = record.get("error") or {}
    parts = [record_label(record), json.dumps(record.get("arguments") or record.get("payload") or {})]
    parts.append(error.get("message", "") if isinstance(error, dict) else str(error))
    return " ".join(parts).lower()


def compact_json(value: object, limit: int = ARGUMENTS_PREVIEW_CHARS) -> str:
    text = json.dumps(value, separators=(", ", ": "), ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_time(timestamp: float | None) -> str:
    if timestamp is None:
        return ""
    whole = time.strftime("%H:%M:%S", time.localtime(timestamp))
    return f"{whole}.{int((timestamp % 1) * 1000):03d}"


def make_row(record: dict) -> AuditRow:
    arguments = record.get("arguments") if record.get("kind") == "action" else record.get("payload")
    duration = record.get("duration_ms")
    cells = (
        str(record.get("seq", "")),
        format_time(record.get("time")),
        record.get("actor", ""),
        record_label(record),
        compact_json(arguments or {}),
        record_status(record),
        "" if duration is None else f"{duration:.1f} ms",
    )
    return AuditRow(record.get("seq", -1), cells, record_status(record), record.get("actor", ""))


class AuditTableModel:
    """Filtered view over the records of one trace; ``base_dir`` resolves the image paths the trace wrote."""

    def __init__(self, records: list[dict] | None = None, base_dir: str | Path | None = None):
        self.base_dir = Path(base_dir) if base_dir is not None else None
        self._records: list[dict] = []
        self._by_seq: dict[int, dict] = {}
        self._filter = AuditFilter()
        self._visible: list[dict] = []
        self.extend(records or [])

    @property
    def filter(self) -> AuditFilter:
        return self._filter

    def set_filter(self, audit_filter: AuditFilter) -> None:
        self._filter = audit_filter
        self._visible = [record for record in self._records if audit_filter.matches(record)]

    def reset(self, records: list[dict], base_dir: str | Path | None = None) -> None:
        """Show another trace (a live session's or one loaded from disk)."""
        self.base_dir = Path(base_dir) if base_dir is not None else None
        self._records, self._by_seq, self._visible = [], {}, []
        self.extend(records)

    def extend(self, records: list[dict]) -> list[AuditRow]:
        """Add records in trace order; returns the rows that became visible (the table appends just those)."""
        added = []
        for record in records:
            self._records.append(record)
            self._by_seq[record.get("seq", len(self._records) - 1)] = record
            if self._filter.matches(record):
                self._visible.append(record)
                added.append(make_row(record))
        return added

    def __len__(self) -> int:
        return len(self._visible)

    @property
    def total(self) -> int:
        return len(self._records)

    def rows(self) -> list[AuditRow]:
        return [make_row(record) for record in self._visible]

    def record_at(self, row: int) -> dict:
        if not 0 <= row < len(self._visible):
            raise IndexError(f"row {row} is not shown (the table has {len(self._visible)} rows)")
        return self._with_state(self._visible[row])

    def record(self, seq: int) -> dict:
        if seq not in self._by_seq:
            raise KeyError(f"no record with seq {seq}")
        return self._with_state(self._by_seq[seq])

    def _with_state(self, record: dict) -> dict:
        """An action record with its full viewer state (traces store deltas; see :mod:`..audit`), rebuilt
        on demand so the table never holds a snapshot per record."""
        if record.get("kind") != "action" or "state" in record:
            return record
        return {**record, "state": state_at(self._records, record.get("seq"))}

    def actors(self) -> list[str]:
        return sorted({record.get("actor", "") for record in self._records} - {""})

    def statuses(self) -> list[str]:
        return sorted({record_status(record) for record in self._records} - {""})

    def details(self, seq: int) -> RecordDetails:
        record = self.record(seq)
        error = record.get("error") or {}
        is_action = record.get("kind") == "action"
        result = record.get("result") or {}
        return RecordDetails(
            seq=seq,
            title=f"#{seq} {record_label(record)} by {record.get('actor', '?')}",
            status=record_status(record),
            error=f"{error.get('code')}: {error.get('message')}" if error else "",
            arguments_json=json.dumps(
                record.get("arguments") if is_action else record.get("payload"), indent=2, default=str
            ),
            result_json=json.dumps(result.get("data", {}), indent=2, default=str),
            state_json=json.dumps(record.get("state", {}), indent=2, default=str),
            images=[self._image_ref(image) for image in result.get("images", [])],
            restorable=is_action and bool(record.get("state")),
        )

    def _image_ref(self, image: dict) -> ImageRef:
        offset = image.get("slice_offset_mm")
        caption = f"{image.get('view', '?')} {image.get('width', '?')}x{image.get('height', '?')}"
        if offset is not None:
            caption += f" @ {offset:.1f} mm"
        path = image.get("path")
        resolved = None
        if path and self.base_dir is not None and (self.base_dir / path).is_file():
            resolved = self.base_dir / path
        return ImageRef(image.get("view", ""), caption, resolved)


class LiveAuditFeed:
    """Collects records as a trace writes them, from any thread, for the GUI thread to drain on a timer.

    Trace listeners run on the thread that called the action (a REST request, the copilot, a script); Qt
    widgets may only be touched from the main thread, so the listener only queues. Records already in the
    trace when the feed attaches are delivered first, each record exactly once, in sequence order.
    """

    def __init__(self, trace: AuditTrace):
        self.trace = trace
        self._pending: deque[dict] = deque()
        self._lock = threading.Lock()
        self._next_seq = 0
        trace.add_listener(self._on_record)
        with self._lock:
            self._pending.extend(list(trace.records))

    def _on_record(self, record: dict) -> None:
        with self._lock:
            self._pending.append(record)

    def drain(self) -> list[dict]:
        with self._lock:
            records = sorted(self._pending, key=lambda record: record["seq"])
            self._pending.clear()
            fresh = []
            for record in records:
                if record["seq"] >= self._next_seq:
                    fresh.append(record)
                    self._next_seq = record["seq"] + 1
        return fresh

    def close(self) -> None:
        self.trace.remove_listener(self._on_record)

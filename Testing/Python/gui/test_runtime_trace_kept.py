"""No audit trace is ever deleted or written over: an existing trace path is refused, and two Slicer sessions
started within the same second (a quick track switch, the module's sub-tests) get folders of their own."""

from __future__ import annotations

import time

import pytest

from MedOpenClawLib.core.audit import AuditTrace, verify_trace
from MedOpenClawLib.gui.app_session import AppSession, new_session_directory


def test_an_existing_trace_is_refused_and_kept(tmp_path):
    first = AuditTrace(tmp_path / "trace.jsonl", header={"n": 1})
    first.record_event("note", {"kept": True})
    before = first.path.read_bytes()
    with pytest.raises(FileExistsError, match="never overwritten"):
        AuditTrace(tmp_path / "trace.jsonl", header={"n": 2})
    assert first.path.read_bytes() == before and verify_trace(first.path).ok


def test_sessions_in_the_same_second_keep_both_traces(tmp_path, monkeypatch):
    monkeypatch.setattr(time, "strftime", lambda pattern, *args: "20260101-120000")
    sessions = [AppSession.create(tmp_path, track=track) for track in ("A", "B")]
    paths = [session.trace.path for session in sessions]
    assert [path.parent.name for path in paths] == ["20260101-120000", "20260101-120000-2"]
    assert all(verify_trace(path).ok for path in paths)
    assert new_session_directory(tmp_path).name == "20260101-120000-3"

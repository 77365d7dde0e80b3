"""Audit-log panel model: rows, filtering, details with saved images, live feed, restore-this-view, and the
export/verify/replay trace tools — on a real slicer-core scene."""

from __future__ import annotations

import threading

import pytest

from MedOpenClawLib.core.audit import AuditTrace, state_at
from MedOpenClawLib.gui.audit_table import AuditFilter, AuditTableModel, LiveAuditFeed
from MedOpenClawLib.gui.view_restore import plan_restore, restore_view


@pytest.fixture
def session(slicer_session):
    registry = slicer_session
    registry.call("set_slice_offset", {"view": "axial", "offset": 4.0, "size": 64})
    registry.call("zoom", {"view": "axial", "factor": 2.0, "size": 64})
    registry.call("bookmark_view", {"view": "axial", "label": "lesion"})
    registry.call("set_slice_offset", {"view": "axial", "offset": "high", "size": 64})  # schema error
    registry.call("select_volume", {"volume_name": "T1", "size": 64}, actor="human")
    yield registry


def model_of(registry) -> AuditTableModel:
    return AuditTableModel(registry.trace.records, registry.trace.path.parent)


def test_rows_show_every_record_in_order(session):
    model = model_of(session)
    rows = model.rows()
    assert [row.seq for row in rows] == list(range(len(session.trace.records)))
    open_row = next(row for row in rows if row.cells[3] == "open_case")
    assert open_row.actor == "human" and open_row.status == "ok" and open_row.cells[6].endswith(" ms")
    arguments = open_row.cells[4]  # long arguments are cut for the table; the details pane has them all
    assert arguments.startswith('{"dicom_dir": "/') and arguments.endswith("…") and len(arguments) == 80


def test_filters_combine_text_actor_status_and_events(session):
    model = model_of(session)
    model.set_filter(AuditFilter(status="error"))
    assert [model.record_at(i)["action"] for i in range(len(model))] == ["set_slice_offset"]
    model.set_filter(AuditFilter(text="LESION"))  # matches the bookmark's label argument, any case
    assert [model.record_at(i)["action"] for i in range(len(model))] == ["bookmark_view"]
    model.set_filter(AuditFilter(actor="human", include_events=False))
    assert [model.record_at(i)["action"] for i in range(len(model))] == ["open_case", "select_volume"]
    model.set_filter(AuditFilter(text="no such thing"))
    assert len(model) == 0 and model.total == len(session.trace.records)
    with pytest.raises(IndexError):
        model.record_at(0)


def test_details_show_error_state_and_saved_images(session):
    model = model_of(session)
    failed = next(r for r in session.trace.records if r.get("status") == "error")
    details = model.details(failed["seq"])
    assert details.error.startswith("invalid_argument:") and not details.images
    zoom = next(r for r in session.trace.records if r.get("action") == "zoom")
    details = model.details(zoom["seq"])
    assert details.restorable and '"axial"' in details.state_json
    assert len(details.images) == 1 and details.images[0].path.is_file()
    assert details.images[0].caption.startswith("axial 64x64 @ 4.0 mm")
    header = model.details(0)
    assert not header.restorable and header.title.startswith("#0 session_start")
    with pytest.raises(KeyError):
        model.details(999)


def test_live_feed_delivers_each_record_once_from_any_thread(tmp_path):
    trace = AuditTrace(tmp_path / "t.jsonl")
    feed = LiveAuditFeed(trace)
    workers = [threading.Thread(target=lambda: [trace.record_event("note", {"i": i}) for i in range(20)])
               for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    drained = feed.drain() + feed.drain()
    assert [record["seq"] for record in drained] == list(range(61))
    model = AuditTableModel()
    model.set_filter(AuditFilter(text="note"))
    assert len(model.extend(drained)) == 60
    feed.close()
    trace.record_event("after_close", {})
    assert feed.drain() == []


def test_restore_this_view_uses_audited_human_actions(session):
    bookmark = next(r for r in session.trace.records if r.get("action") == "bookmark_view")
    before = len(session.trace.records)
    outcome = restore_view(session, bookmark)
    assert outcome.ok, outcome.summary()
    state = session.context.state()
    assert state["active_volume"] == "FLAIR"
    assert state["views"]["axial"]["offset_mm"] == pytest.approx(4.0)
    recorded = state_at(session.trace.records, bookmark["seq"])
    assert state["views"]["axial"]["field_of_view_mm"] == pytest.approx(recorded["views"]["axial"]["field_of_view_mm"])
    added = session.trace.records[before:]
    assert added and all(r["actor"] == "human" and r["extra"]["restore_view_of"] == bookmark["seq"] for r in added)
    assert plan_restore(session.context.state(), recorded) == []  # nothing left to do


def test_restore_refuses_records_without_state(session):
    with pytest.raises(ValueError):
        restore_view(session, session.trace.records[0])


def test_export_and_verify_of_the_session_trace(session, tmp_path):
    from MedOpenClawLib.gui.trace_tools import export_trace, verify

    trace_path = session.trace.path
    archive = export_trace(trace_path, tmp_path / "export" / "session.zip")
    unpacked = tmp_path / "unpacked"
    import zipfile

    with zipfile.ZipFile(archive) as handle:
        names = handle.namelist()
        handle.extractall(unpacked)
    assert names[0] == "trace.jsonl" and any(name.endswith(".png") for name in names)
    assert verify(unpacked / "trace.jsonl").ok
    lines = trace_path.read_text().splitlines()
    lines[3] = lines[3].replace('"human"', '"agent"', 1) if '"human"' in lines[3] else lines[3].replace(
        '"agent"', '"human"', 1)
    trace_path.write_text("\n".join(lines) + "\n")
    assert not verify(trace_path).ok
    with pytest.raises(ValueError, match="fails verification"):
        export_trace(trace_path, tmp_path / "export" / "tampered.zip")


def test_replay_button_re_executes_the_session_on_a_headless_scene(session, tmp_path):
    from MedOpenClawLib.gui.trace_tools import replay

    report = replay(session.trace.path, [tmp_path / "data"])
    assert report.ok, report.message
    assert report.actions == len(session.trace.actions())
    assert session.context.engine.app.scene is not None  # the live session was not touched

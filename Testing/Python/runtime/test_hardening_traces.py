"""Trace tools trust nothing they read (issue 23): `trace verify` opens artifacts only inside the trace's folder
and only regular files, reports wrong-typed records by number, tells a sidecar anchor from one kept out of band;
`replay` reads only the data roots it is given, never the ones a trace records."""

from __future__ import annotations

import json
import os
import shutil

from runtime_data import call_ok

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.cli import main
from MedOpenClawLib.core.audit import AuditTrace, anchor_path, read_trace, record_hash, verify_trace
from MedOpenClawLib.replay import replay_trace


def _trace(tmp_path, data_root):
    path = tmp_path / "run" / "trace.jsonl"
    registry = build_slicer_registry([data_root], trace=AuditTrace(path, save_images=True))
    call_ok(registry, "open_case", dicom_dir=str(data_root), size=64)
    call_ok(registry, "bookmark_view", view="axial", label="b")
    return path, registry


def _rewrite(path, records, sidecar: bool = False):
    """Write ``records`` with the chain recomputed (what an editor able to write the folder can do)."""
    previous = "0" * 64
    for record in records:
        if isinstance(record, dict):
            record["prev_hash"] = previous
            try:
                record["hash"] = previous = record_hash(record)
            except ValueError:  # NaN: no chain can hold it, the record is written as it is
                record["hash"] = previous = "0" * 64
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    if sidecar:
        anchor_path(path).write_text(json.dumps({"records": len(records), "head": previous}))


def test_verify_opens_artifacts_only_in_the_trace_folder_and_only_regular_files(tmp_path, data_root):
    path, _ = _trace(tmp_path, data_root)
    records = read_trace(path)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x").write_bytes(b"a secret")
    os.mkfifo(tmp_path / "fifo")  # opening it would block verify for ever
    (path.parent / "zero.png").symlink_to("/dev/zero")
    (path.parent / "inside.png").symlink_to(next((path.parent / "trace_images").glob("*.png")))
    os.mkfifo(path.parent / "pipe.png")
    for target, expected in (("../elsewhere/x", "outside the trace's folder"), ("/dev/zero", "outside"),
                             (str(tmp_path / "fifo"), "outside"), ("zero.png", "outside"),
                             ("inside.png", "not a regular file"), ("pipe.png", "not a regular file"),
                             (str(path.parent / "pipe.png"), "not a regular file")):
        edited = [dict(record) for record in records]
        edited[-1]["artifacts"] = [{"kind": "image", "path": target, "sha256": "0" * 64}]
        _rewrite(path, edited, sidecar=True)
        report = verify_trace(path)
        assert not report.ok and report.first_bad_seq == len(records) - 1 and expected in report.message, report


def test_wrong_typed_records_are_reported_by_number(tmp_path, data_root, capsys):
    path, _ = _trace(tmp_path, data_root)
    records = read_trace(path)
    for junk in ([1, 2], "text", 7, None, {"seq": 3}, {**records[2], "artifacts": "x"},
                 {**records[2], "artifacts": [{"path": 5}]}, {**records[2], "state": {"x": float("nan")}}):
        _rewrite(path, [*records[:2], junk, *records[3:]])
        report = verify_trace(path)
        assert not report.ok and report.first_bad_seq == 2, (junk, report)
        assert main(["trace", "verify", str(path)]) == 1
    path.write_text("".join(json.dumps(record) + "\n" for record in [*records[:2], {**records[2], "hash": 5}]))
    assert verify_trace(path).first_bad_seq == 2
    path.write_text("[" * 100_000 + "\n")
    assert not verify_trace(path).ok
    for special in ("/dev/zero", str(tmp_path / "fifo")):
        if special.endswith("fifo"):
            os.mkfifo(special)
        report = verify_trace(special)
        assert not report.ok and "not a regular file" in report.message
    capsys.readouterr()


def test_a_rewritten_trace_with_its_sidecar_is_caught_only_by_an_anchor_kept_out_of_band(tmp_path, data_root,
                                                                                           capsys):
    path, registry = _trace(tmp_path, data_root)
    kept = registry.trace.anchor()  # what the run's owner keeps elsewhere
    records = read_trace(path)
    records[-1]["arguments"]["label"] = "forged"
    _rewrite(path, records, sidecar=True)
    sidecar = verify_trace(path)
    assert sidecar.ok and sidecar.anchor_source == "sidecar" and "--expect-head" in sidecar.message
    assert main(["trace", "verify", str(path), "--expect-head", kept["head"],
                 "--expect-records", str(kept["records"])]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["anchor_source"] == "given" and "rewritten" in report["message"]


def test_replay_reads_only_the_roots_it_is_given(tmp_path, data_root):
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(data_root / "CT.nii.gz", outside / "secret.nii.gz")
    path = tmp_path / "run" / "trace.jsonl"
    registry = build_slicer_registry([outside], trace=AuditTrace(path))  # recorded with the wider root
    call_ok(registry, "open_case", dicom_dir=str(outside / "secret.nii.gz"), size=64)
    config = read_trace(path)[1]
    assert config["kind"] == "session_config" and str(outside) in config["payload"]["data_roots"]
    report = replay_trace(path, [data_root])
    assert not report.ok and "recorded ok, replayed error" in report.message and "outside" in report.message

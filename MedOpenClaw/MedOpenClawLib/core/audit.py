"""Append-only, hash-chained JSONL audit trace: one file per episode.

Each record carries ``prev_hash`` and its own ``hash`` (sha256 of the canonical JSON of the record without the
``hash`` key), so editing, inserting or removing any record breaks the chain from that point on.

Viewer state is stored as deltas, so a trace grows linearly with its calls (a full snapshot per record grew
quadratically: every record repeated the whole evidence list). An action record holds either ``state`` (a full
snapshot: the first action record, and whenever the deltas written since the last snapshot outweigh one) or
``state_delta`` against the state after the previous action record::

    {}                                   unchanged
    {"$set": value}                      replaced
    {"$append": [items]}                 a list that grew at its end
    {"$keys": {key: delta}, "$drop": [keys]}   an object with some keys changed, added or removed

:func:`action_states` and :func:`state_at` rebuild the full state after any record.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .hygiene import bounded_message, preview
from .names import UnsafeName, regular_file
from .redaction import redact_value
from .result import Result
from .sinks import write_json

GENESIS = "0" * 64


def canonical_json(value: Any) -> str:
    """Strict JSON (NaN/Infinity refused: they are not JSON, and no record may hold them)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str,
                      allow_nan=False)


def canonical_bytes(value: Any) -> bytes:
    """What a record is hashed as: raises for what no trace can hold (NaN, text that is not well-formed Unicode)."""
    return canonical_json(value).encode("utf-8")


def recordable(value: Any) -> Any:
    """``value`` if a trace can hold it, else a bounded summary (e.g. model text with a lone surrogate in a
    call's audit extras must not make the call itself unrecordable)."""
    try:
        canonical_bytes(value)
        return value
    except (ValueError, TypeError, RecursionError) as error:  # UnicodeEncodeError is a ValueError
        return {"unrecordable": type(error).__name__, "preview": preview(value)}


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fresh_path(directory: str | os.PathLike, stem: str, suffix: str = "") -> Path:
    """A path in ``directory`` that does not exist yet: ``stem+suffix``, then ``stem-2+suffix``, ...

    Artifacts are never overwritten, so the checksums that earlier trace records hold stay valid, and the
    names depend only on what the session did (a replay into a fresh folder writes the same names).
    """
    directory = Path(directory)
    candidate, number = directory / f"{stem}{suffix}", 1
    while candidate.exists():
        number += 1
        candidate = directory / f"{stem}-{number}{suffix}"
    return candidate


def anchor_path(trace_path: str | os.PathLike) -> Path:
    """The sidecar beside a trace holding its record count and last hash, rewritten after every record."""
    trace_path = Path(trace_path)
    return trace_path.with_name(trace_path.name + ".anchor.json")


def read_anchor(trace_path: str | os.PathLike) -> dict | None:
    """``{"records", "head"}`` from the trace's sidecar, or None when there is none (or it is unreadable)."""
    try:
        anchor = json.loads(anchor_path(trace_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return anchor if isinstance(anchor, dict) else None


def _same(old: Any, new: Any) -> bool:
    """Equal as JSON text: ``1``, ``1.0`` and ``True`` compare equal in Python but are different records. Both
    tests run in C: a walk in Python over a state that grows with the session (the evidence list) made every
    recorded call cost more than the one before."""
    return old == new and canonical_json(old) == canonical_json(new)


def state_delta(old: Any, new: Any) -> dict:
    """The delta (grammar in the module docstring) that turns ``old`` into ``new`` exactly."""
    if isinstance(old, dict) and isinstance(new, dict):
        changed = {key: state_delta(old[key], value) if key in old else {"$set": value}
                   for key, value in new.items() if key not in old or not _same(old[key], value)}
        delta: dict = {"$keys": changed} if changed else {}
        dropped = [key for key in old if key not in new]
        if dropped:
            delta["$drop"] = dropped
        return delta
    if _same(old, new):
        return {}
    if isinstance(old, list) and isinstance(new, list) and len(new) > len(old) and _same(new[:len(old)], old):
        return {"$append": new[len(old):]}
    return {"$set": new}


def section_texts(state: Any) -> dict[str, str] | None:
    """The canonical JSON of each top-level section of a state (None unless it is an object with text keys)."""
    if not isinstance(state, dict) or not all(isinstance(key, str) for key in state):
        return None
    return {key: canonical_json(value) for key, value in state.items()}


def joined_length(texts: dict[str, str]) -> int:
    """``len(canonical_json(state))`` from ``section_texts(state)``: ``{"key":text,...}``, without encoding the
    state again to learn its size."""
    return 2 + sum(len(canonical_json(key)) + 1 + len(text) for key, text in texts.items()) + max(len(texts) - 1, 0)


class StateDeltaError(ValueError):
    """A recorded delta does not apply to the state it follows (a malformed or reordered trace)."""


def apply_state_delta(old: Any, delta: Any) -> Any:
    """``old`` changed by ``delta``; iterative over the delta's nesting is not needed: deltas are as deep as
    the state, which the registry builds itself. Malformed deltas raise :class:`StateDeltaError`."""
    if not isinstance(delta, dict):
        raise StateDeltaError(f"a state delta must be an object, not {type(delta).__name__}")
    if not delta:
        return old
    if "$set" in delta:
        return delta["$set"]
    if "$append" in delta:
        if not isinstance(old, list) or not isinstance(delta["$append"], list):
            raise StateDeltaError("$append applies to a list only")
        return old + delta["$append"]
    if not isinstance(old, dict) or not isinstance(delta.get("$keys", {}), dict) \
            or not isinstance(delta.get("$drop", []), list):
        raise StateDeltaError("$keys/$drop apply to an object only")
    new = {key: value for key, value in old.items() if key not in delta.get("$drop", [])}
    for key, change in delta.get("$keys", {}).items():
        new[key] = apply_state_delta(old.get(key), change)
    return new


class StateReplay:
    """The full state after each action record, fed the action records in order, one at a time (a trace read
    as a stream keeps no more than the states). Before the first full snapshot (a window of a longer trace) the
    state is unknown: None."""

    def __init__(self) -> None:
        self.current: dict | None = None

    def after(self, record: dict) -> dict | None:
        if isinstance(record.get("state"), dict):
            self.current = record["state"]
        elif self.current is not None and "state_delta" in record:
            self.current = apply_state_delta(self.current, record["state_delta"])
        return self.current


def action_states(records: Iterable) -> list[tuple[dict, dict | None]]:
    """(action record, full state after it) for every action record, in order (:class:`StateReplay`)."""
    replay = StateReplay()
    return [(record, replay.after(record)) for record in records
            if isinstance(record, dict) and record.get("kind") == "action"]


def state_at(records: list[dict], seq: int) -> dict | None:
    """The full viewer state after the action record numbered ``seq`` (None if it is no action record)."""
    for record, state in action_states(records):
        if record.get("seq") == seq:
            return state
    return None


def record_hash(record: dict) -> str:
    body = {key: value for key, value in record.items() if key != "hash"}
    return sha256_bytes(canonical_bytes(body))


class AuditTrace:
    """Writes records to ``path`` (JSONL, flushed per record) and keeps them in memory for live views.

    With ``save_images`` the rendered views of every action are written beside the trace and referenced as
    artifacts with their sha256, so reports and auditors can see exactly what the agent saw.
    """

    def __init__(self, path: str | os.PathLike | None, header: dict | None = None, save_images: bool = False,
                 window: int | None = None, chained: bool = True):
        """``window`` bounds the records kept in memory (a long-running server); the file keeps them all.

        ``chained`` False is for a viewer whose supervisor keeps the session's real trace
        (:mod:`..server.supervisor` hashes and delta-encodes its own copy of each record): its records are neither
        hashed nor delta-encoded (each holds the full state), only encoded as a chained trace would encode them,
        so an outcome the real trace could not hold still fails here and the registry undoes the call. Such a
        trace stays in memory: nothing could verify its file."""
        if path and not chained:
            raise ValueError("an unchained audit trace stays in memory")
        self.chained = chained
        self.path = Path(path) if path else None
        self.save_images = save_images and self.path is not None
        self.window = window
        self.records: list[dict] = []
        self.count = 0  # records written so far, including those dropped from the in-memory window
        self._listeners: list[Callable[[dict], None]] = []
        self._lock = threading.Lock()
        self._last_hash = GENESIS
        self.last_state: dict | None = None  # the full state of the last action record (deltas are against it)
        self._delta_bytes = 0  # bytes of deltas written since the last full snapshot
        self._last_texts: dict[str, str] | None = None  # section_texts of last_state
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:  # created here, exclusively: an audit trace is never overwritten, nor its images or anchor
                with self.path.open("x", encoding="utf-8"):
                    pass
            except FileExistsError:
                raise FileExistsError(f"{self.path} already holds an audit trace; traces are never overwritten, "
                                      "choose another path") from None
            if anchor_path(self.path).exists() or (self.image_dir.exists() and any(self.image_dir.iterdir())):
                self.path.unlink()
                raise FileExistsError(f"{self.path}'s anchor or images are left from another trace; choose "
                                      "another path")
        self.record_event("session_start", header or {})

    @property
    def image_dir(self) -> Path | None:
        return None if self.path is None else self.path.with_name(self.path.stem + "_images")

    def add_listener(self, listener: Callable[[dict], None]) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[dict], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    @property
    def head(self) -> str:
        """The hash of the last record: with :attr:`count`, what a run artefact anchors the trace to."""
        return self._last_hash

    def anchor(self) -> dict:
        return {"records": self.count, "head": self._last_hash}

    def record_event(self, kind: str, payload: dict, actor: str = "system") -> dict:
        """Non-action records: session header, raw model output receipts, episode end, human notes.

        A payload the trace cannot hold (e.g. model text with a lone surrogate) is kept as a bounded summary."""
        try:
            return self._append({"kind": kind, "actor": actor, "payload": redact_value(payload)})
        except (ValueError, TypeError, RecursionError) as error:  # UnicodeEncodeError is a ValueError
            summary = {"unrecordable_payload": f"{type(error).__name__}", "preview": preview(payload)}
            return self._append({"kind": kind, "actor": actor, "payload": summary})

    def record_action(
        self,
        actor: str,
        action: str,
        arguments: dict,
        result: Result,
        state: dict,
        duration_ms: float,
        extra: dict | None = None,
        round_id: object = None,
    ) -> dict:
        state_fields, delta_bytes, texts = self._state_fields(state)
        artifacts = list(result.artifacts)
        if self.save_images and result.images:
            artifacts.extend(self._write_images(result))
        record = {
            "kind": "action",
            "actor": actor,
            "action": action,
            "arguments": redact_value(arguments),
            "status": "ok" if result.ok else "error",
            "error": result.error,
            "result": {"data": result.data, "images": [image.to_json(inline=False) for image in result.images]},
            **state_fields,
            "artifacts": artifacts,
            "duration_ms": round(duration_ms, 3),
        }
        if round_id is not None:  # calls of one agent round share it; replay needs it to charge the budget alike
            record["round"] = round_id
        if extra:
            record["extra"] = redact_value(extra)
        written = self._append(record)
        self.last_state, self._delta_bytes, self._last_texts = state, delta_bytes, texts
        return written

    def _state_fields(self, state: dict) -> tuple[dict, int, dict]:
        """(``{"state": full}`` or ``{"state_delta": delta}``, delta bytes since the last snapshot after it, the
        canonical JSON of each section of ``state``): a snapshot again once the deltas since the last one outweigh
        it, so reconstruction never starts far back and the bytes stay linear in the calls (snapshot bytes never
        exceed delta bytes). Each section is encoded once per call and compared with the last call's text: a
        section that grows with the session (the evidence list) is not walked or encoded again to find it
        unchanged, nor the whole state encoded to learn its size."""
        if not self.chained:  # the supervisor delta-encodes its own copy
            return {"state": state}, 0, None
        texts = section_texts(state)
        if self.last_state is None:
            return {"state": state}, 0, texts
        if texts is None or self._last_texts is None:
            delta, full_size = state_delta(self.last_state, state), len(canonical_json(state))
        else:
            old = self.last_state
            changed = {key: state_delta(old[key], value) if key in old else {"$set": value}
                       for key, value in state.items() if self._last_texts.get(key) != texts[key]}
            delta = {"$keys": changed} if changed else {}
            dropped = [key for key in old if key not in state]
            if dropped:
                delta["$drop"] = dropped
            full_size = joined_length(texts)
        size = len(canonical_json(delta))
        if self._delta_bytes + size > full_size:
            return {"state": state}, 0, texts
        return {"state_delta": delta}, self._delta_bytes + size, texts

    def _write_images(self, result: Result) -> list[dict]:
        directory = self.image_dir
        directory.mkdir(parents=True, exist_ok=True)
        written = []
        seq = self.count
        for index, image in enumerate(result.images):
            target = directory / f"{seq:05d}_{index}_{image.view}.png"
            data = image.png_bytes()
            target.write_bytes(data)
            image.path = str(target.relative_to(self.path.parent))
            written.append({"kind": "image", "path": image.path, "sha256": sha256_bytes(data)})
        return written

    def _append(self, body: dict) -> dict:
        with self._lock:
            record = {"seq": self.count, "time": round(time.time(), 6), **body}
            if self.chained:
                record["prev_hash"] = self._last_hash
                record["hash"] = record_hash(record)  # raises before anything changes if the record is not JSON
            else:
                canonical_bytes(record)  # raises as record_hash would: the same records fail
            if self.path is not None:
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(canonical_json(record) + "\n")
                self._write_anchor(self.count + 1, record["hash"])
            self._last_hash = record.get("hash", self._last_hash)  # an unchained trace's head stays the genesis
            self.count += 1
            self.records.append(record)
            if self.window is not None and len(self.records) > 2 * self.window:
                del self.records[: len(self.records) - self.window]
        for listener in self._listeners:
            listener(record)
        return record

    def _write_anchor(self, count: int, head: str) -> None:
        """Atomically, so a reader never sees a half-written anchor; a truncated trace then disagrees with it."""
        write_json(anchor_path(self.path), {"records": count, "head": head}, indent=None)

    def actions(self) -> list[dict]:
        return [record for record in self.records if record["kind"] == "action"]


def iter_trace(path: str | os.PathLike) -> Iterator:
    """The records of a trace file one at a time, as written (a crafted trace may hold anything: callers check
    types), so a reader that needs one record at a time holds one. Only a regular file is opened (never a FIFO or
    ``/dev/zero``); a line too deeply nested for the parser raises ``ValueError`` like any other malformed line."""
    path = regular_file(path)
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            if line.strip():
                try:
                    yield json.loads(line)
                except RecursionError as error:
                    raise ValueError(f"line {number + 1} is nested too deeply") from error


def read_trace(path: str | os.PathLike) -> list:
    """Every record of a trace file (:func:`iter_trace`), in a list."""
    return list(iter_trace(path))


def artifact_problem(artifacts: object, base: Path) -> str | None:
    """Why the artifacts of a record do not check out, or None. A path is only opened when it lies in the trace's
    folder (``base``) and is a regular file: a crafted trace can neither make verify hash ``/dev/zero`` nor use
    it as an oracle on files elsewhere."""
    if not isinstance(artifacts, list):
        return "its artifacts are not a list"
    for artifact in artifacts:
        if not isinstance(artifact, dict) or not isinstance(artifact.get("path"), str) \
                or not isinstance(artifact.get("sha256"), str):
            return f"artifact {preview(artifact)} is not a {{path, sha256}} object"
        shown = preview(artifact["path"])
        try:
            target = regular_file(base / artifact["path"], inside=base)
        except (UnsafeName, OSError) as error:
            if "outside" in str(error):
                return f"artifact {shown} lies outside the trace's folder; it was not opened"
            return f"artifact {shown} is missing or not a regular file"
        if sha256_file(target) != artifact["sha256"]:
            return f"artifact {shown} changed"
    return None


@dataclass
class VerifyReport:
    ok: bool
    records: int
    first_bad_seq: int | None = None
    message: str = ""
    anchored: bool = False  # checked against a record count and head hash
    # "given": kept out of band by the run's owner (--expect-head, --anchor); "sidecar": the file beside the
    # trace, which whoever can rewrite the trace can rewrite too; "none"
    anchor_source: str = "none"

    def to_json(self) -> dict:
        return {"ok": self.ok, "records": self.records, "first_bad_seq": self.first_bad_seq, "message": self.message,
                "anchored": self.anchored, "anchor_source": self.anchor_source}


def _record_problem(index: int, record: Any, previous: str, base: Path,
                    check_artifacts: bool) -> tuple[int, str] | None:
    """(index, why) when record ``index`` breaks the chain after hash ``previous``; None when it holds."""
    if not isinstance(record, dict) or not isinstance(record.get("hash"), str):
        return index, f"record {index} is not a trace record ({type(record).__name__})"
    seq = record.get("seq")
    if seq != index:
        return index, f"record {index} has seq {seq}: a record was removed"
    if record.get("prev_hash") != previous:
        return index, f"record {index} does not chain to its predecessor"
    try:
        intact = record_hash(record) == record["hash"]
    except (ValueError, TypeError, RecursionError):  # NaN, unencodable text: not something a trace writes
        intact = False
    if not intact:
        return index, f"record {index} was modified after it was written"
    if check_artifacts:
        problem = artifact_problem(record.get("artifacts", []), base)
        if problem:
            return index, f"record {index}: {problem}"
    return None


def verify_trace(path: str | os.PathLike, check_artifacts: bool = True, anchor: dict | None = None) -> VerifyReport:
    """Check sequence numbers, the hash chain, (optionally) artifact checksums, and that the trace ends where
    ``anchor`` (default: its sidecar) says: the chain alone cannot show records removed from the end."""
    previous, count, failure = GENESIS, 0, None
    base = Path(path).parent
    try:  # one record at a time: memory stays flat whatever the trace's length
        for index, record in enumerate(iter_trace(path)):
            count = index + 1
            if failure is None:  # after the first bad record, only count the rest (and read it: unreadable wins)
                failure = _record_problem(index, record, previous, base, check_artifacts)
                previous = record["hash"] if failure is None else previous
    except (OSError, ValueError) as error:  # UnsafeName, JSONDecodeError and UnicodeDecodeError are ValueErrors
        return VerifyReport(False, 0, 0, f"unreadable trace: {bounded_message(str(error))}")
    if failure is not None:
        return VerifyReport(False, count, failure[0], failure[1])
    source = "given" if anchor is not None else "sidecar"
    anchor = anchor if anchor is not None else read_anchor(path)
    if anchor is None:
        message = f"{count} records, chain intact (no anchor: removing final records would go unnoticed)"
        return VerifyReport(True, count, None, message)
    expected_count, expected_head = anchor.get("records"), anchor.get("head")
    if (expected_count is not None and expected_count != count) or (
            expected_head is not None and expected_head != previous):
        message = (f"the trace holds {count} records (head {previous[:12]}) but its anchor says "
                   f"{preview(expected_count)} (head {preview(expected_head, 12)}): records were removed or added at "
                   "the end, or the trace was rewritten")
        first_bad = min(count, expected_count) if isinstance(expected_count, int) else count
        return VerifyReport(False, count, first_bad, message, True, source)
    if source == "sidecar":
        message = (f"{count} records, chain intact, sidecar anchor matches (the sidecar lies beside the trace: "
                   "someone able to rewrite both goes unnoticed; check against a head kept elsewhere with "
                   "--expect-head/--expect-records or --anchor)")
    else:
        message = f"{count} records, chain intact, the anchor kept out of band matches"
    return VerifyReport(True, count, None, message, True, source)

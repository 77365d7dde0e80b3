"""The node side of ``bench run --executor ray``: the body of one Ray actor (:class:`WorkerHost`), which hosts
one viewer worker process on its node, and the writing of case files a node lacks.

Kept apart from the driver side (:mod:`.ray_executor`) so an actor process imports only the worker protocol:
every actor start-up pays for its imports.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

from ..core.names import UnsafeName, plain_files
from ..worker.client import WorkerProcess
from ..worker.protocol import WorkerError, WorkerFault, WorkerHung
from .integrity import sha256_of

RESULT_OK, RESULT_REFUSED, RESULT_FAULT = "ok", "refused", "fault"


# ------------------------------------------------------------------------------------------ case files
def tree_files(root: Path) -> list[Path]:
    """The regular files of a case tree (:func:`..names.plain_files`): a link anywhere in it refuses the tree,
    so a refused link never arrives on a node as a plain file."""
    try:
        return plain_files(root)
    except UnsafeName as error:
        raise ValueError(str(error)) from error


def tree_records(root: Path) -> dict[str, dict]:
    """Size and sha256 of every file under ``root`` (relative paths): what a node must hold there."""
    return {path.relative_to(root).as_posix(): {"size": path.stat().st_size, "sha256": sha256_of(path)}
            for path in tree_files(Path(root))}


def tree_signature(root: Path) -> tuple:
    """Cheap change detector (names, sizes, mtimes): a node re-hashes a tree only when this changes."""
    return tuple((path.relative_to(root).as_posix(), path.stat().st_size, path.stat().st_mtime_ns)
                 for path in tree_files(root))


def pack_tree(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in tree_files(root)}


def materialize_tree(root: Path, files: dict[str, bytes], records: dict[str, dict]) -> None:
    """Write ``files`` at ``root`` (built beside it and renamed into place, so a half-written tree is never
    seen) and check the result against the driver's records."""
    root = Path(root)
    staging = Path(tempfile.mkdtemp(prefix=f".{root.name}-staging-", dir=_make_parent(root)))
    try:
        for relative, content in files.items():
            target = (staging / relative).resolve()
            if not target.is_relative_to(staging.resolve()):
                raise ValueError(f"case file {relative!r} escapes its data root")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        if tree_records(staging) != records:
            raise ValueError(f"case files for {root} arrived corrupted (size or sha256 differ)")
        try:
            os.replace(staging, root)
        except OSError:  # another actor on this node materialized it first
            if tree_records(root) != records:
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _make_parent(root: Path) -> Path:
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"cannot create {root.parent} on node {socket.gethostname()}: {error}; "
                         "give the nodes the cases at the same path (shared or copied) or a writable one") from error
    return root.parent


# ------------------------------------------------------------------------------------------ the actor
class WorkerHost:
    """The body of one Ray actor: one viewer worker process on this node, a scratch directory for its traces.

    Answers are tagged dictionaries rather than exceptions, so a refused request (:class:`WorkerError`) and a
    worker fault reach the driver as the same types the local pool raises.
    """

    def __init__(self, slicer: str | None, startup_timeout_s: float, call_timeout_s: float):
        self.scratch = Path(tempfile.mkdtemp(prefix="medopenclaw-ray-"))
        self.worker = WorkerProcess(self.scratch / "worker", slicer, startup_timeout_s, call_timeout_s)
        self.verified: dict[str, tuple[dict, tuple]] = {}  # data root -> (records, signature) checked here

    def start(self) -> dict:
        try:
            self.worker.start()
        except WorkerFault as fault:
            return {"status": RESULT_FAULT, "message": f"{fault} on node {socket.gethostname()}: "
                                                       f"{self.log_tail()}"}
        import ray

        return {"status": RESULT_OK, "pid": self.worker.pid, "actor_pid": os.getpid(), "node": socket.gethostname(),
                "node_id": ray.get_runtime_context().get_node_id()}

    def request(self, op: str, fields: dict, timeout_s: float | None = None) -> dict:
        """Forward one request to the worker, bounded by ``timeout_s`` (default: its call timeout)."""
        if op == "start":
            fields = {**fields, "trace_path": str(self.scratch / "out" / fields["trace_path"])}
        try:
            return {"status": RESULT_OK, "result": self.worker.request(op, timeout_s=timeout_s, **fields)}
        except WorkerError as error:
            return {"status": RESULT_REFUSED, "code": error.code, "message": str(error)}
        except WorkerFault as fault:
            return {"status": RESULT_FAULT, "message": f"{fault} (node {socket.gethostname()})",
                    "hung": isinstance(fault, WorkerHung)}

    def collect(self, relative_dir: str) -> dict[str, bytes]:
        """Hand over (and forget) the files an episode wrote under ``relative_dir``."""
        directory = self.scratch / "out" / relative_dir
        files = {path.relative_to(self.scratch / "out").as_posix(): path.read_bytes() for path in tree_files(directory)}
        shutil.rmtree(directory, ignore_errors=True)
        return files

    def case_status(self, root: str, records: dict[str, dict]) -> str:
        """``present`` (the same files at ``root``), ``missing`` or ``different``."""
        path = Path(root)
        if not path.exists():
            return "missing"
        signature = tree_signature(path)
        if self.verified.get(root) == (records, signature):
            return "present"
        if tree_records(path) != records:
            return "different"
        self.verified[root] = (records, signature)
        return "present"

    def put_case(self, root: str, records: dict[str, dict], files: dict[str, bytes]) -> dict:
        try:
            materialize_tree(Path(root), files, records)
        except ValueError as error:
            return {"status": RESULT_FAULT, "message": str(error)}
        return {"status": RESULT_OK}

    def log_tail(self, size: int = 2000) -> str:
        log = self.worker.workdir / "worker.log"
        return log.read_bytes()[-size:].decode(errors="replace") if log.exists() else ""

    def worker_log(self) -> bytes:
        log = self.worker.workdir / "worker.log"
        return log.read_bytes() if log.exists() else b""

    def close(self) -> None:
        self.worker.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

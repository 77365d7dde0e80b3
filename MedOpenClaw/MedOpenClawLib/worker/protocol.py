"""What both ends of the worker protocol share: the token variable, the supervised record keys, the errors, and
the framing of a message: one JSON line, then the bytes of its binary attachments."""

from __future__ import annotations

import json
from collections.abc import Sequence

TOKEN_ENV = "MEDOPENCLAW_WORKER_TOKEN"
# what a supervisor copies of the child's audit record into its own trace
SUPERVISED_RECORD_KEYS = ("action", "actor", "arguments", "state", "round", "extra")
# a handler's result may carry binary attachments under this key (a list of bytes): they travel after the line
ATTACHMENTS = "attachments"
MAX_ATTACHMENT_BYTES = 1 << 30  # a declared size beyond this is a corrupt header, not an image
STREAM_BUFFER = 1 << 18  # both ends' socket files: an answer's line (state, data) is read in one or two calls


class WorkerError(Exception):
    """A request the worker refused (bad op, no episode started); the worker itself is healthy."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class WorkerFault(Exception):
    """The worker process crashed, hung or broke the protocol: discard it and retry on a fresh one."""


class WorkerHung(WorkerFault):
    """The worker did not answer within the call's timeout (it was killed)."""


class WorkerGarbled(WorkerFault):
    """The worker sent what the protocol does not allow (the link is out of step; it was killed)."""


def write_message(stream, message: dict, attachments: Sequence[bytes] = ()) -> None:
    """``message`` as one JSON line, its line naming the sizes of ``attachments``, whose bytes follow as they are:
    a rendered view's PNG crosses the link without base64 and without a JSON encoder escaping (and the other
    end's decoder scanning) a third of a megabyte per answer."""
    if attachments:
        message = {**message, ATTACHMENTS: [len(data) for data in attachments]}
    stream.write(json.dumps(message, default=str).encode() + b"\n")
    for data in attachments:
        stream.write(data)
    stream.flush()


def read_message(stream) -> tuple[dict, list[bytes]] | None:
    """The next message and its attachments (None at the end of the stream). A line that is no JSON object or a
    malformed size list raises :class:`WorkerGarbled` (the link can no longer be trusted to be in step), a stream
    ending inside the attachments :class:`WorkerFault`."""
    line = stream.readline()
    if not line:
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as error:
        raise WorkerGarbled(f"protocol error: a line that is not JSON ({type(error).__name__}: "
                          f"{str(error)[:120]})") from None
    if not isinstance(message, dict):
        raise WorkerGarbled(f"protocol error: a message must be a JSON object, not {type(message).__name__}")
    sizes = message.pop(ATTACHMENTS, [])
    if not isinstance(sizes, list) or not all(type(size) is int and size >= 0 for size in sizes) \
            or sum(sizes) > MAX_ATTACHMENT_BYTES:
        raise WorkerGarbled(f"protocol error: {ATTACHMENTS} must list at most {MAX_ATTACHMENT_BYTES} bytes as "
                          f"non-negative integers, not {str(sizes)[:80]}")
    attachments = [stream.read(size) for size in sizes]
    if any(len(data) < size for data, size in zip(attachments, sizes)):
        received = sum(len(data) for data in attachments)
        raise WorkerFault(f"the connection closed after {received} of {sum(sizes)} attachment bytes")
    return message, attachments

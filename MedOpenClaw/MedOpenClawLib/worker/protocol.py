"""What both ends of the worker protocol share: the token variable, the supervised record keys, the errors, and
the framing of a message: one JSON line, then the bytes of its binary attachments. An answer may be preceded by
parts, each one attachment sent ahead of it (a view's raw pixels, streamed as soon as it is rendered)."""

from __future__ import annotations

import json
import math
import socket
from collections.abc import Callable, Sequence

TOKEN_ENV = "MEDOPENCLAW_WORKER_TOKEN"
# what a supervisor copies of the child's audit record into its own trace
SUPERVISED_RECORD_KEYS = ("action", "actor", "arguments", "state", "round", "extra")
# a handler's result may carry binary attachments under this key (a list of bytes): they travel after the line
ATTACHMENTS = "attachments"
MAX_ATTACHMENT_BYTES = 1 << 30  # a declared size beyond this is a corrupt header, not an image
# a part of the answer to request ``id``: ``{"id": id, "part": n, "pixels": [height, width(, channels)]}`` and
# one attachment, the n-th of the answer's: a view's uint8 pixels, row by row (the receiver encodes the PNG)
PART = "part"
PIXELS = "pixels"
MAX_PARTS = 256  # parts ahead of one answer: the views of one call are a handful
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


def write_message(stream, message: dict, attachments: Sequence = ()) -> None:
    """``message`` as one JSON line, its line naming the sizes of ``attachments`` (bytes-like: e.g. a contiguous
    array), whose bytes follow as they are: a rendered view crosses the link without base64 and without a JSON
    encoder escaping (and the other end's decoder scanning) a third of a megabyte per answer. Each piece goes into
    ``stream``'s buffer as it lies, flushed once: small ones leave together, so the reader wakes to a whole
    message, and one larger than the buffer goes to the socket uncopied (joining a view's quarter megabyte into
    one fresh block first costs several times the send)."""
    pieces = [memoryview(data).cast("B") for data in attachments]
    sizes = {ATTACHMENTS: [piece.nbytes for piece in pieces]} if pieces else {}
    stream.write(json.dumps({**message, **sizes}, default=str).encode() + b"\n")
    for piece in pieces:
        stream.write(piece)
    stream.flush()


def no_delay(connection: socket.socket) -> socket.socket:
    """``connection`` with Nagle's algorithm off: a message's last partial segment leaves at once instead of
    waiting for the other end's (delayed) acknowledgement of the segments before it."""
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection


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


def read_answer(stream, request_id: object,
                relay: Callable[[bytes, list[int] | None], object] | None = None) -> tuple[dict, list] | None:
    """The answer to request ``request_id`` and all its attachments, each passed as it arrives through ``relay``
    (if given) with the shape of its pixels (None for the answer's own attachments): first those of the parts
    streamed ahead of the answer, then its own (None if the stream ends first). A part or an answer to another
    request, parts out of order or not of one attachment each, pixels whose shape does not fit their bytes, more
    than :data:`MAX_PARTS`, or more than :data:`MAX_ATTACHMENT_BYTES` in all raise :class:`WorkerGarbled`."""
    attachments: list = []
    received = 0
    while True:
        frame = read_message(stream)
        if frame is None:
            return None
        message, data = frame
        if message.get("id") != request_id:
            raise WorkerGarbled(f"protocol error: {'a part of ' if PART in message else ''}the answer to request "
                                f"{str(message.get('id'))[:20]}, expected {request_id}")
        received += sum(len(item) for item in data)
        if received > MAX_ATTACHMENT_BYTES:
            raise WorkerGarbled(f"protocol error: an answer of more than {MAX_ATTACHMENT_BYTES} attachment bytes")
        if PART not in message:
            attachments += data if relay is None else [relay(item, None) for item in data]
            return message, attachments
        if message[PART] != len(attachments) or type(message[PART]) is not int or len(data) != 1 \
                or len(attachments) >= MAX_PARTS:
            raise WorkerGarbled(f"protocol error: part {str(message[PART])[:20]} with {len(data)} attachments after "
                                f"{len(attachments)} parts (parts are numbered from 0, one attachment each, at most "
                                f"{MAX_PARTS})")
        shape = pixel_shape(message.get(PIXELS), len(data[0]))
        attachments.append(data[0] if relay is None else relay(data[0], shape))


def pixel_shape(shape: object, size: int) -> list[int]:
    """``shape`` when it is ``[height, width]`` or ``[height, width, channels]`` (1-4 channels) of exactly ``size``
    bytes; else :class:`WorkerGarbled`."""
    if not (isinstance(shape, list) and len(shape) in (2, 3) and all(type(n) is int and n > 0 for n in shape)
            and (len(shape) == 2 or shape[2] <= 4) and math.prod(shape) == size):
        raise WorkerGarbled(f"protocol error: a part's {PIXELS} must be [height, width] or [height, width, 1-4 "
                            f"channels] of its {size} bytes, not {str(shape)[:80]}")
    return shape

"""The worker protocol's framing: a JSON line, then the raw bytes of its attachments (the views' PNGs of a
supervised call, relayed by the server without base64 or a second JSON pass). What the other end sends that the
protocol does not allow is a clear :class:`WorkerGarbled` (or :class:`WorkerFault` for a stream that ends), never
an exception of another kind nor a desynchronised link."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from MedOpenClawLib.core.result import PNG_ATTACHMENT, RenderedImage, Result
from MedOpenClawLib.worker.protocol import (
    ATTACHMENTS,
    MAX_ATTACHMENT_BYTES,
    WorkerFault,
    WorkerGarbled,
    read_message,
    write_message,
)


def framed(*messages: tuple) -> io.BytesIO:
    stream = io.BytesIO()
    for message, attachments in messages:
        write_message(stream, message, attachments)
    stream.seek(0)
    return stream


def test_attachments_follow_their_line_byte_for_byte():
    blobs = [bytes(range(256)) * 3 + b"\n\n{", b"", b"\x89PNG\r\n\x1a\n"]
    stream = framed(({"id": 1, "result": {"a": "\u00e9"}}, blobs), ({"id": 2}, []))
    first_line = stream.getvalue().split(b"\n", 1)[0]
    assert json.loads(first_line)[ATTACHMENTS] == [len(blob) for blob in blobs]  # sizes only, no base64
    assert read_message(stream) == ({"id": 1, "result": {"a": "\u00e9"}}, blobs)
    assert read_message(stream) == ({"id": 2}, [])  # still in step after the binary block
    assert read_message(stream) is None


@pytest.mark.parametrize("line", [b'{"id": 1, "ok": tru\n', b"[1, 2]\n", b"\xff\xfe\n",
                                  b"[" * 100_000 + b"\n", b'{"attachments": [-1]}\n', b'{"attachments": [true]}\n',
                                  b'{"attachments": "12"}\n', b'{"attachments": [1.5]}\n',
                                  b'{"attachments": [%d]}\n' % (MAX_ATTACHMENT_BYTES + 1)])
def test_a_line_out_of_protocol_is_garbled(line):
    with pytest.raises(WorkerGarbled, match="protocol error"):
        read_message(io.BytesIO(line + b"\x89PNG"))


def test_a_stream_ending_inside_the_attachments_is_a_fault():
    with pytest.raises(WorkerFault, match="after 4 of 4100 attachment bytes") as raised:
        read_message(io.BytesIO(b'{"id": 1, "attachments": [4096, 4]}\n\x89PNG'))
    assert not isinstance(raised.value, WorkerGarbled)


def rendered(view: str, seed: int) -> RenderedImage:
    pixels = np.random.default_rng(seed).integers(0, 256, (24, 32), dtype=np.uint8)
    return RenderedImage(view=view, width=32, height=24, slice_offset_mm=1.5, pixels=pixels, image_id=f"img-{seed}")


def test_a_result_crosses_the_wire_as_it_would_be_served_in_process():
    result = Result(ok=True, data={"n": 1}, images=[rendered("axial", 1), rendered("coronal", 2)])
    body, pngs = result.to_wire()
    assert all("png_base64" not in item for item in body["images"])
    assert [item[PNG_ATTACHMENT] for item in body["images"]] == [0, 1]
    relayed = Result.from_json(json.loads(json.dumps(body)), pngs)
    assert relayed.images[0].pixels is None  # relayed as bytes: nothing to decode or re-encode
    assert json.dumps(relayed.to_json()) == json.dumps(result.to_json())


@pytest.mark.parametrize("index, attachments, problem", [(2, None, "names none"), ("0", None, "names none"),
                                                         (True, None, "names none"), (-1, None, "names none"),
                                                         (0, [b"GIF89a"], "not a PNG")])
def test_an_image_naming_a_wrong_attachment_is_refused(index, attachments, problem):
    body, pngs = Result(ok=True, images=[rendered("axial", 3)]).to_wire()
    body["images"][0][PNG_ATTACHMENT] = index
    with pytest.raises(ValueError, match=problem):
        Result.from_json(body, pngs if attachments is None else attachments)

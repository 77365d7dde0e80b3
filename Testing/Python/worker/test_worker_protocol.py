"""The worker protocol's framing: a JSON line, then the raw bytes of its attachments (the views' PNGs of a
supervised call, relayed by the server without base64 or a second JSON pass). What the other end sends that the
protocol does not allow is a clear :class:`WorkerGarbled` (or :class:`WorkerFault` for a stream that ends), never
an exception of another kind nor a desynchronised link."""

from __future__ import annotations

import base64
import io
import json
import re

import numpy as np
import pytest

from MedOpenClawLib.core.result import PNG_ATTACHMENT, PNG_LISTENER, RelayedPng, RenderedImage, Result
from MedOpenClawLib.worker import protocol
from MedOpenClawLib.worker.protocol import (
    ATTACHMENTS,
    MAX_ATTACHMENT_BYTES,
    PART,
    WorkerFault,
    WorkerGarbled,
    read_answer,
    read_message,
    write_message,
)
from MedOpenClawLib.worker.service import PartStream


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


def test_parts_streamed_ahead_of_an_answer_are_its_first_attachments():
    pngs = [rendered("axial", seed).png_bytes() for seed in (4, 5, 6)]
    stream = framed(({"id": 7, PART: 0}, [pngs[0]]), ({"id": 7, PART: 1}, [pngs[1]]),
                    ({"id": 7, "ok": True, "result": {}}, [pngs[2]]), ({"id": 8, "ok": True}, []))
    answer, attachments = read_answer(stream, 7, RelayedPng.of)
    assert answer == {"id": 7, "ok": True, "result": {}}
    assert [item.png for item in attachments] == pngs  # parts first, in order, then the answer's own
    assert [item.base64 for item in attachments] == [base64.b64encode(png).decode() for png in pngs]
    assert read_answer(stream, 8) == ({"id": 8, "ok": True}, [])  # the next answer, in step
    assert read_answer(framed(({"id": 9, PART: 0}, [b"x"])), 9) is None  # the stream ended before the answer


@pytest.mark.parametrize("frames, problem", [
    ([({"id": 6, PART: 0}, [b"x"])], "a part of the answer to request 6, expected 7"),
    ([({"id": 6, "ok": True}, [])], "the answer to request 6, expected 7"),
    ([({"id": 7, PART: 1}, [b"x"])], "part 1 with 1 attachments after 0 parts"),
    ([({"id": 7, PART: 0}, [b"x"]), ({"id": 7, PART: 0}, [b"y"])], "part 0 with 1 attachments after 1 parts"),
    ([({"id": 7, PART: True}, [b"x"]), ({"id": 7, PART: True}, [b"y"])], "part True"),
    ([({"id": 7, PART: "0"}, [b"x"])], "part 0 with"),
    ([({"id": 7, PART: 0}, [])], "part 0 with 0 attachments"),
    ([({"id": 7, PART: 0}, [b"x", b"y"])], "part 0 with 2 attachments"),
    ([({"id": 7, PART: index}, [b"x"]) for index in range(5)], "at most 4"),
    ([({"id": 7, PART: 0}, [b"x" * 60]), ({"id": 7, "ok": True}, [b"y" * 60])], "more than 100 attachment bytes"),
])
def test_parts_out_of_protocol_are_garbled(frames, problem, monkeypatch):
    monkeypatch.setattr(protocol, "MAX_PARTS", 4)
    monkeypatch.setattr(protocol, "MAX_ATTACHMENT_BYTES", 100)
    stream = framed(*frames, ({"id": 7, "ok": True}, []))
    with pytest.raises(WorkerGarbled, match="protocol error: .*" + re.escape(problem)):
        read_answer(stream, 7)


def test_a_call_streams_each_view_as_it_is_encoded_and_the_rest_with_its_answer():
    """The worker's side: views encoded ahead while the call runs go as parts (the answer waits for those still
    encoding); a view not encoded ahead goes with the answer; the server rebuilds the in-process answer."""
    stream = io.BytesIO()
    parts = PartStream(stream, 3)
    images = [rendered("axial", 7), rendered("coronal", 8), rendered("sagittal", 9)]
    discarded = rendered("axial", 11)
    listening = PNG_LISTENER.set(parts)
    try:
        for image in (images[0], discarded, images[1]):
            image.encode_ahead()
    finally:
        PNG_LISTENER.reset(listening)
    streamed = parts.finish(images)
    parts(images[2], images[2].png_bytes())  # an encoder thread after the answer's views: too late to stream
    position = {id(image): index for index, image in enumerate(streamed)}  # the discarded view may be among them
    assert id(images[0]) in position and id(images[1]) in position and id(images[2]) not in position
    result = Result(ok=True, images=images)
    body, pngs = result.to_wire(streamed)
    assert [item[PNG_ATTACHMENT] for item in body["images"]] == [position[id(images[0])], position[id(images[1])],
                                                                 len(streamed)]
    assert pngs == [images[2].png_bytes()]
    write_message(stream, {"id": 3, "ok": True, "result": body}, pngs)
    stream.seek(0)
    answer, attachments = read_answer(stream, 3, RelayedPng.of)
    relayed = Result.from_json(answer["result"], attachments)
    assert json.dumps(relayed.to_json()) == json.dumps(result.to_json())


def test_a_broken_link_stops_the_streaming_without_failing_the_call():
    class Broken(io.BytesIO):
        def write(self, data):
            raise BrokenPipeError("the supervisor is gone")

    parts = PartStream(Broken(), 1)
    image = rendered("axial", 10)
    parts(image, image.png_bytes())
    assert parts.finish([image]) == []  # the answer's own write reports the broken link

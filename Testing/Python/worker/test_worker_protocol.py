"""The worker protocol's framing: a JSON line, then the raw bytes of its attachments (the views of a supervised
call: streamed as raw pixels and encoded by the server, or PNGs relayed without base64 or a second JSON pass).
What the other end sends that the protocol does not allow is a clear :class:`WorkerGarbled` (or
:class:`WorkerFault` for a stream that ends), never an exception of another kind nor a desynchronised link."""

from __future__ import annotations

import base64
import io
import json
import re

import numpy as np
import pytest

from MedOpenClawLib.core.png import EncodedPng, encode_png
from MedOpenClawLib.core.result import (
    PNG_ATTACHMENT,
    VIEW_STREAM,
    RelayedPixels,
    RenderedImage,
    Result,
    relayed,
)
from MedOpenClawLib.worker import protocol
from MedOpenClawLib.worker.protocol import (
    ATTACHMENTS,
    MAX_ATTACHMENT_BYTES,
    PART,
    PIXELS,
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
    images = [rendered("axial", seed) for seed in (4, 5)]
    png = rendered("sagittal", 6).png_bytes()
    stream = framed(({"id": 7, PART: 0, PIXELS: [24, 32]}, [images[0].pixels.tobytes()]),
                    ({"id": 7, PART: 1, PIXELS: [24, 32]}, [images[1].pixels]),  # an array goes as it lies
                    ({"id": 7, "ok": True, "result": {}}, [png]), ({"id": 8, "ok": True}, []))
    answer, attachments = read_answer(stream, 7, relayed)
    assert answer == {"id": 7, "ok": True, "result": {}}
    parts, own = attachments[:2], attachments[2]  # parts first, in order, then the answer's own
    assert all(isinstance(item, RelayedPixels) for item in parts) and isinstance(own, EncodedPng)
    for item, image in zip(parts, images):
        assert np.array_equal(item.pixels, image.pixels)
        encoded = item.encoding.result()  # encoded here, once, with its base64
        assert encoded.png == image.png_bytes() and encoded.base64 == base64.b64encode(encoded.png).decode()
    assert own.png == png and own.base64 == base64.b64encode(png).decode()
    assert read_answer(stream, 8) == ({"id": 8, "ok": True}, [])  # the next answer, in step
    assert read_answer(framed(({"id": 9, PART: 0, PIXELS: [1, 1]}, [b"x"])), 9) is None  # ended before the answer


@pytest.mark.parametrize("frames, problem", [
    ([({"id": 6, PART: 0, PIXELS: [1, 1]}, [b"x"])], "a part of the answer to request 6, expected 7"),
    ([({"id": 6, "ok": True}, [])], "the answer to request 6, expected 7"),
    ([({"id": 7, PART: 1, PIXELS: [1, 1]}, [b"x"])], "part 1 with 1 attachments after 0 parts"),
    ([({"id": 7, PART: 0, PIXELS: [1, 1]}, [b"x"]), ({"id": 7, PART: 0, PIXELS: [1, 1]}, [b"y"])],
     "part 0 with 1 attachments after 1 parts"),
    ([({"id": 7, PART: True, PIXELS: [1, 1]}, [b"x"]), ({"id": 7, PART: True}, [b"y"])], "part True"),
    ([({"id": 7, PART: "0", PIXELS: [1, 1]}, [b"x"])], "part 0 with"),
    ([({"id": 7, PART: 0, PIXELS: [1, 1]}, [])], "part 0 with 0 attachments"),
    ([({"id": 7, PART: 0, PIXELS: [1, 1]}, [b"x", b"y"])], "part 0 with 2 attachments"),
    ([({"id": 7, PART: index, PIXELS: [1, 1]}, [b"x"]) for index in range(5)], "at most 4"),
    ([({"id": 7, PART: 0, PIXELS: [6, 10]}, [b"x" * 60]), ({"id": 7, "ok": True}, [b"y" * 60])],
     "more than 100 attachment bytes"),
    ([({"id": 7, PART: 0}, [b"x"])], "pixels must be"),
    ([({"id": 7, PART: 0, PIXELS: [2, 2]}, [b"xyz"])], "of its 3 bytes, not [2, 2]"),
    ([({"id": 7, PART: 0, PIXELS: [1, 1, 1, 1]}, [b"x"])], "pixels must be"),
    ([({"id": 7, PART: 0, PIXELS: [1, 1, 5]}, [b"x" * 5])], "pixels must be"),
    ([({"id": 7, PART: 0, PIXELS: [1, True]}, [b"x"])], "pixels must be"),
    ([({"id": 7, PART: 0, PIXELS: [-1, -1]}, [b"x"])], "pixels must be"),
    ([({"id": 7, PART: 0, PIXELS: "1x1"}, [b"x"])], "pixels must be"),
])
def test_parts_out_of_protocol_are_garbled(frames, problem, monkeypatch):
    monkeypatch.setattr(protocol, "MAX_PARTS", 4)
    monkeypatch.setattr(protocol, "MAX_ATTACHMENT_BYTES", 100)
    stream = framed(*frames, ({"id": 7, "ok": True}, []))
    with pytest.raises(WorkerGarbled, match="protocol error: .*" + re.escape(problem)):
        read_answer(stream, 7, relayed)


def test_a_call_streams_each_view_as_it_is_rendered_and_the_rest_with_its_answer():
    """The worker's side: each view encoded ahead (rendered for the agent) goes as a part, its raw pixels, at
    once; a view not encoded ahead goes with the answer as a PNG; the server encodes the parts and rebuilds the
    answer an in-process registry would have served, byte for byte."""
    stream = io.BytesIO()
    parts = PartStream(stream, 3)
    images = [rendered("axial", 7), rendered("coronal", 8), rendered("sagittal", 9)]
    images[1].pixels = np.random.default_rng(8).integers(0, 256, (24, 32, 3), dtype=np.uint8)  # colour
    images[0].pixels = np.asfortranarray(images[0].pixels)  # not row by row in memory: sent row by row anyway
    discarded = rendered("axial", 11)  # streamed, then not part of the result
    streaming = VIEW_STREAM.set(parts)
    try:
        for image in (images[0], discarded, images[1]):
            image.encode_ahead()
    finally:
        VIEW_STREAM.reset(streaming)
    assert parts.sent == [images[0], discarded, images[1]]
    assert all(image._encoding is None and image._png is None for image in parts.sent)  # not encoded here
    result = Result(ok=True, images=images)
    body, pngs = result.to_wire(parts.sent)
    assert [item[PNG_ATTACHMENT] for item in body["images"]] == [0, 2, 3]
    assert pngs == [images[2].png_bytes()] and images[0]._png is None  # only the unstreamed view was encoded
    write_message(stream, {"id": 3, "ok": True, "result": body}, pngs)
    stream.seek(0)
    answer, attachments = read_answer(stream, 3, relayed)
    served = Result.from_json(answer["result"], attachments)
    assert json.dumps(served.to_json()) == json.dumps(result.to_json())
    assert served.images[1].png_bytes() == encode_png(images[1].pixels)


def test_a_streamed_view_of_another_size_than_its_image_is_refused():
    body, _ = Result(ok=True, images=[rendered("axial", 3)]).to_wire([])
    pixels = RelayedPixels.of(bytes(24 * 31), [24, 31])
    with pytest.raises(ValueError, match="holds 31x24 pixels, image img-3 is 32x24"):
        Result.from_json(body, [pixels])


def test_a_broken_link_stops_the_streaming_and_the_view_is_encoded_here():
    class Broken(io.BytesIO):
        def write(self, data):
            raise BrokenPipeError("the supervisor is gone")

    parts = PartStream(Broken(), 1)
    image, later = rendered("axial", 10), rendered("axial", 12)
    streaming = VIEW_STREAM.set(parts)
    try:
        image.encode_ahead()
        later.encode_ahead()
    finally:
        VIEW_STREAM.reset(streaming)
    assert parts.sent == []  # the answer's own write reports the broken link
    assert image.png_bytes() == encode_png(image.pixels) and later._encoding is not None

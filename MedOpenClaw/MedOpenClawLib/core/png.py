"""Lossless PNG of rendered views, fast enough to stay off an answer's time: every row UP-filtered (the byte above:
the best filter on rendered views) and deflated by ISA-L (``isal``, about 3x zlib's speed at a similar size on
rendered slices: scripts/bench_actions.py png_encoders_512), or by zlib's Huffman-only mode where isal is not
installed (e.g. Slicer's own Python). Both release the GIL.

The rows are deflated in stripes of :data:`STRIPE_ROWS`, each a raw deflate stream ended on a byte boundary, which
joined make the one zlib stream PNG stores (as pigz joins its blocks): a view being encoded ahead
(:class:`PngEncoding`) can have its stripes deflated on two threads at once. The stripes depend on the image
alone: the PNG's bytes are the same however it was encoded.
"""

from __future__ import annotations

import base64
import os
import struct
import threading
import zlib
from concurrent.futures import TimeoutError as FutureTimeout  # not the builtin one before Python 3.11
from dataclasses import dataclass
from typing import Any

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
STRIPE_ROWS = 256  # a 512 px view: two stripes, deflated on two cores
ZLIB_HEADER = b"\x78\x01"  # deflate, 32 KiB window, fastest level (RFC 1950; 0x7801 is a multiple of 31)


class Base64Text(str):
    """Text this process base64-encoded itself: its alphabet needs no JSON escaping, so a front-end may splice it
    into a JSON answer verbatim (the JSON encoder scanning the ~0.4 MB of an observe costs more than the rest of
    the answer). Text another process sent stays a plain ``str``."""


@dataclass(frozen=True)
class EncodedPng:
    """A view's PNG and its base64, each computed once, off the answer's thread: on the encoder threads while the
    answer's next view renders (:class:`PngEncoding`), or as the PNG another process sent arrived. base64
    holds the GIL: done here, it overlaps rendering instead of adding to the answer once the last view is
    rendered."""

    png: bytes
    base64: Base64Text

    @classmethod
    def of(cls, png: bytes) -> EncodedPng:
        return cls(png, Base64Text(base64.b64encode(png).decode("ascii")))


def encode_png(pixels: Any) -> bytes:
    """Lossless PNG of a uint8 (H, W) or (H, W, C) array (C = 2, 3, 4: grey + alpha, RGB, RGBA); ValueError for
    anything else."""
    filtered, header = _filtered_rows(pixels)
    stripes = _stripes(filtered)
    return _png(header, filtered, [_deflate(stripe, last=index == len(stripes) - 1)
                                   for index, stripe in enumerate(stripes)])


class PngEncoding:
    """A view's PNG being encoded ahead (the bytes :func:`encode_png` gives, with the base64): one encoder thread
    deflates its stripes in order, which leaves the other cores to the renderer while the answer's next view
    renders, and whoever waits for the result deflates the stripes not yet begun meanwhile, so the last view of an
    answer, which nothing else overlaps, is deflated on two cores. Whoever deflates the last stripe joins them.
    The pixels are read here, once (filtered into rows of its own); invalid ones raise ValueError at once."""

    def __init__(self, pixels: Any):
        self._filtered, self._header = _filtered_rows(pixels)
        self._stripes = _stripes(self._filtered)
        self._deflated: list[bytes | None] = [None] * len(self._stripes)
        self._claimed = self._finished = 0
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._encoded: EncodedPng | None = None
        self._error: BaseException | None = None
        encoders().submit(self._deflate_unclaimed)

    def result(self, timeout: float | None = None) -> EncodedPng:
        """The :class:`EncodedPng`, once every stripe is deflated (the caller deflating those not yet begun); the
        encoding's own exception if it failed."""
        self._deflate_unclaimed()
        if not self._done.wait(timeout):
            raise FutureTimeout(f"the PNG was not encoded within {timeout} s")
        if self._error is not None:
            raise self._error
        return self._encoded

    def _deflate_unclaimed(self) -> None:
        while True:
            with self._lock:
                if self._claimed == len(self._stripes) or self._error is not None:
                    return
                index = self._claimed
                self._claimed += 1
            try:
                deflated = _deflate(self._stripes[index], last=index == len(self._stripes) - 1)
                with self._lock:
                    self._deflated[index] = deflated
                    self._finished += 1
                    complete = self._finished == len(self._stripes)
                if complete:
                    self._encoded = EncodedPng.of(_png(self._header, self._filtered, self._deflated))
            except BaseException as error:  # delivered to whoever waits for the view
                self._error, complete = error, True
            if complete:
                self._done.set()
                return


def _filtered_rows(pixels: Any) -> tuple[Any, bytes]:
    """The rows of ``pixels``, each after its filter-type byte and UP-filtered, and the PNG's IHDR."""
    import numpy as np

    array = np.ascontiguousarray(pixels)
    channels = 1 if array.ndim == 2 else array.shape[2] if array.ndim == 3 else 0
    colour = {1: 0, 2: 4, 3: 2, 4: 6}.get(channels)  # PNG colour types: grey, grey + alpha, RGB, RGBA
    if colour is None or array.dtype != np.uint8 or 0 in array.shape:
        raise ValueError(f"a PNG image is a non-empty uint8 (H, W) or (H, W, 2|3|4) array, not {array.dtype} "
                         f"{array.shape}")
    height, width = array.shape[:2]
    rows = array.reshape(height, -1)
    filtered = np.empty((height, rows.shape[1] + 1), dtype=np.uint8)
    filtered[:, 0] = 2  # filter type UP
    filtered[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])  # modulo 256, as PNG defines it
    return filtered, struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)


def _stripes(filtered: Any) -> list[memoryview]:
    return [filtered[start:start + STRIPE_ROWS].data for start in range(0, filtered.shape[0], STRIPE_ROWS)]


def _deflate(data: memoryview, last: bool) -> bytes:
    """``data`` as raw deflate, ended on a byte boundary with a final block only if ``last``."""
    try:
        from isal import isal_zlib as module
    except ImportError:
        module = zlib
        compressor = zlib.compressobj(1, zlib.DEFLATED, -15, 9, zlib.Z_HUFFMAN_ONLY)
    else:
        compressor = module.compressobj(1, module.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush(module.Z_FINISH if last else module.Z_SYNC_FLUSH)


def _png(header: bytes, filtered: Any, deflated: list) -> bytes:
    """The PNG file: one IDAT holding the zlib stream of the joined stripes."""
    try:
        from isal.isal_zlib import adler32
    except ImportError:
        adler32 = zlib.adler32
    stream = b"".join((ZLIB_HEADER, *deflated, struct.pack(">I", adler32(filtered.data))))
    return b"".join((PNG_SIGNATURE, _chunk(b"IHDR", header), _chunk(b"IDAT", stream), _chunk(b"IEND", b"")))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))


_ENCODERS: list = []  # one thread pool, made on first use


def encoders():
    """The thread pool PNG encodings run on (the encoders release the GIL, so they overlap rendering)."""
    if not _ENCODERS:
        from concurrent.futures import ThreadPoolExecutor

        _ENCODERS.append(ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="png"))
    return _ENCODERS[0]

"""Image sizes and the one downscale every model-bound image passes through before it enters a conversation.

An image too large for the strictest mainstream server (a cine contact sheet of 2304 px, a WSI screenshot of
several MB) would otherwise stay in the history and make every later request fail. Downscaling keeps the aspect
ratio, so 0..999 coordinates read on the smaller image still map through the geometry of the original.
"""

from __future__ import annotations

import base64
import io
import struct

# Anthropic: at most 8000 px per side, and 2000 px once a request holds more than 20 images; 5 MB per image
# (base64). OpenAI scales anything larger than 2048 px down itself. 2000 px and 3.75 MB raw fit all of them.
MAX_IMAGE_EDGE = 2000
MAX_IMAGE_BYTES = 3_750_000
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk, without decoding it; (0, 0) for anything that is not a PNG."""
    if len(data) < 24 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return 0, 0
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def png_size_b64(png_base64: str) -> tuple[int, int]:
    """:func:`png_size` of base64 text, decoding only the first 32 bytes' worth."""
    try:
        return png_size(base64.b64decode(png_base64[:44]))
    except ValueError:
        return 0, 0


def fit_png(data: bytes, max_edge: int = MAX_IMAGE_EDGE, max_bytes: int = MAX_IMAGE_BYTES) -> bytes:
    """The PNG unchanged when it fits ``max_edge`` and ``max_bytes``; else downscaled (aspect kept) until it does."""
    width, height = png_size(data)
    if max(width, height) <= max_edge and len(data) <= max_bytes:
        return data
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    image.load()
    edge = min(max(width, height), max_edge) if width and height else max_edge
    while True:
        scale = edge / max(image.width, image.height)
        resized = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                               Image.Resampling.LANCZOS) if scale < 1 else image
        buffer = io.BytesIO()
        resized.save(buffer, format="PNG", optimize=False, compress_level=6)
        if buffer.tell() <= max_bytes or edge <= 64:
            return buffer.getvalue()
        edge = int(edge * 0.8)

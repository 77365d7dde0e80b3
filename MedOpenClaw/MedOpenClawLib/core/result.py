"""The Result contract every action returns, and the one exception handlers raise for bad input.

Errors are data: the registry turns :class:`ActionError` into ``{ok: false, error: {code, message}}`` so a
caller (model, chat panel, REST client) never sees a Python exception.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import Any

from .png import PNG_SIGNATURE, Base64Text, EncodedPng, PngEncoding, encode_png, encoders


class ActionError(Exception):
    """Raised by a handler to reject a call; ``code`` is a stable machine-readable identifier."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class RecordedGeometry:
    """An image geometry as the JSON record a viewer in another process sent: carried, never used to map."""

    record: dict

    @property
    def image_id(self) -> str | None:
        return self.record.get("image_id")

    def to_json(self) -> dict:
        return self.record


# an image's key in Result.to_wire: the index of its view among the attachments (its PNG, or the raw pixels a
# supervised viewer streamed ahead of its answer)
PNG_ATTACHMENT = "png_attachment"


@dataclass(frozen=True)
class RelayedPixels:
    """A view another process rendered and sent as raw pixels, and its :class:`EncodedPng` that this process's
    encoder threads started on arrival: a supervised viewer renders its next view meanwhile, on another core,
    instead of an encoder thread in the viewer contending with its renderer for one GIL."""

    pixels: Any  # numpy uint8 array (H, W) or (H, W, C)
    encoding: PngEncoding

    @classmethod
    def of(cls, data: bytes, shape: Sequence[int]) -> RelayedPixels:
        import numpy as np

        pixels = np.frombuffer(data, dtype=np.uint8).reshape(shape)
        return cls(pixels, PngEncoding(pixels))


def relayed(data: bytes, pixels: Sequence[int] | None) -> EncodedPng | RelayedPixels:
    """An attachment a supervised viewer sent, as this process relays it: raw pixels of the shape ``pixels`` (a
    streamed view, encoded here), else a PNG (base64-encoded once, here)."""
    return EncodedPng.of(data) if pixels is None else RelayedPixels.of(data, pixels)


# who takes each view returned to an agent as soon as it is rendered, as ``stream(image)`` on the rendering thread,
# instead of it being encoded in this process: True once it sent the pixels on to be encoded elsewhere (a
# supervised viewer streams them to its supervisor); None: nobody
VIEW_STREAM: ContextVar[Callable[[Any], bool] | None] = ContextVar("view_stream", default=None)


def encode_all(images: list[RenderedImage]) -> None:
    """Encode the images of one answer in parallel, each once (those already encoding are waited for later)."""
    pending = [image for image in images if image._png is None and image._base64 is None and image._encoding is None
               and image.pixels is not None]
    if len(pending) < 2:
        return
    for image, png in zip(pending, encoders().map(lambda item: encode_png(item.pixels), pending)):
        image._png = png


@dataclass
class RenderedImage:
    """One rendered view. PNG bytes are produced lazily because encoding dominates observe latency.

    ``geometry`` (e.g. a slice image's :class:`~MedOpenClawLib.viewer.image_geometry.SliceImageGeometry`) is how
    the image maps to patient space; its ``image_id`` names the image for later 0..999 arguments.
    """

    view: str
    width: int
    height: int
    slice_offset_mm: float | None = None
    pixels: Any = None  # numpy uint8 array (H, W) or (H, W, 3); encoded on demand
    path: str | None = None
    geometry: Any = None  # an object with ``image_id`` and ``to_json()``
    image_id: str | None = None
    _png: bytes | None = field(default=None, repr=False)
    _base64: str | None = field(default=None, repr=False)  # as a viewer in another process sent it
    _encoding: PngEncoding | None = field(default=None, repr=False, compare=False)  # once encode_ahead ran

    def __post_init__(self):
        if self.image_id is None and self.geometry is not None:
            self.image_id = self.geometry.image_id

    def encode_ahead(self) -> None:
        """Start encoding the PNG and its base64 now, on the encoder threads: a view returned to an agent is always
        sent as PNG, and encoding it while the answer's next view renders takes its encoding off the answer's time.
        The pixels must not change afterwards. A :data:`VIEW_STREAM`, as set where this is called, may take the view
        instead, to have it encoded elsewhere."""
        if self._png is None and self._base64 is None and self._encoding is None and self.pixels is not None:
            stream = VIEW_STREAM.get()
            if stream is None or not stream(self):
                self._encoding = PngEncoding(self.pixels)

    def await_encoding(self) -> None:
        """Wait for the encoding under way, if any (:meth:`encode_ahead`'s, or a relayed view's): its PNG and
        base64."""
        if self._png is None and self._encoding is not None:
            encoded, self._encoding = self._encoding.result(), None
            self._png, self._base64 = encoded.png, encoded.base64

    def png_bytes(self) -> bytes:
        """The PNG, encoded once (or decoded once from the base64 another process sent)."""
        self.await_encoding()
        if self._png is None:
            self._png = base64.b64decode(self._base64) if self._base64 is not None else encode_png(self.pixels)
        return self._png

    def png_base64(self) -> str:
        """The PNG as base64, computed once: an image relayed from another process is never re-encoded."""
        self.await_encoding()
        if self._base64 is None:
            self._base64 = Base64Text(base64.b64encode(self.png_bytes()).decode("ascii"))
        return self._base64

    def to_json(self, inline: bool = True) -> dict:
        item: dict[str, Any] = {
            "view": self.view,
            "width": self.width,
            "height": self.height,
            "slice_offset_mm": self.slice_offset_mm,
            "image_id": self.image_id,
            "geometry": self.geometry.to_json() if self.geometry is not None else None,
        }
        if self.path:
            item["path"] = self.path
        if inline:
            item["png_base64"] = self.png_base64()
        return item

    @classmethod
    def from_json(cls, item: dict, attachments: Sequence[bytes | EncodedPng | RelayedPixels] = ()) -> RenderedImage:
        """The inverse of ``to_json(inline=True)``, or of :meth:`Result.to_wire` given its attachments (PNG bytes,
        :class:`EncodedPng` with their base64 already computed, or :class:`RelayedPixels` being encoded): the image
        a viewer in another process rendered."""
        known = {spec.name for spec in fields(cls) if spec.init and not spec.name.startswith("_")} - {"pixels"}
        image = cls(**{key: value for key, value in item.items() if key in known})
        if isinstance(image.geometry, dict):
            image.geometry = RecordedGeometry(image.geometry)
        if item.get("png_base64"):
            image._base64 = item["png_base64"]
        if PNG_ATTACHMENT in item:
            index = item[PNG_ATTACHMENT]
            if type(index) is not int or not 0 <= index < len(attachments):
                raise ValueError(f"image {PNG_ATTACHMENT} {str(index)[:20]} names none of the "
                                 f"{len(attachments)} attachments")
            attachment = attachments[index]
            if isinstance(attachment, RelayedPixels):
                if tuple(attachment.pixels.shape[:2]) != (image.height, image.width):
                    raise ValueError(f"attachment {index} holds {attachment.pixels.shape[1]}x"
                                     f"{attachment.pixels.shape[0]} pixels, image {str(image.image_id)[:40]} is "
                                     f"{str(image.width)[:10]}x{str(image.height)[:10]}")
                image.pixels, image._encoding = attachment.pixels, attachment.encoding
                return image
            png = attachment.png if isinstance(attachment, EncodedPng) else attachment
            if not png.startswith(PNG_SIGNATURE):
                raise ValueError(f"attachment {index} of image {str(image.image_id)[:40]} is not a PNG")
            image._png = png
            if isinstance(attachment, EncodedPng):
                image._base64 = attachment.base64
        return image


def warning(code: str, message: str, **details: Any) -> dict:
    """One entry of an action's ``data["warnings"]``, the one shape every action reports warnings in: a stable
    machine-readable ``code``, a sentence for a person or a model, and optional details (e.g. ``image_id``)."""
    return {"code": code, "message": message, **details}


def add_warning(data: dict, code: str, message: str, **details: Any) -> dict:
    """Append a warning to ``data["warnings"]`` (created when absent); returns ``data``."""
    data.setdefault("warnings", []).append(warning(code, message, **details))
    return data


def warning_shape_problem(data: dict) -> str | None:
    """Why ``data["warnings"]`` is not a list of {code, message} entries (None when it is, or is absent)."""
    warnings = data.get("warnings", [])
    if "warning" in data:
        return 'a single "warning" field: report it in data["warnings"] (result.add_warning)'
    if not isinstance(warnings, list):
        return "data['warnings'] is not a list"
    for item in warnings:
        if not (isinstance(item, dict) and isinstance(item.get("code"), str) and isinstance(item.get("message"), str)):
            return f"warning {str(item)[:80]!r} is not a {{code, message}} entry (result.warning)"
    return None


@dataclass
class Result:
    """Outcome of one action: ``data`` is JSON-serialisable, ``images`` are rendered views."""

    ok: bool
    data: dict = field(default_factory=dict)
    images: list[RenderedImage] = field(default_factory=list)
    error: dict | None = None
    artifacts: list[dict] = field(default_factory=list)  # [{path, sha256, kind}]

    @classmethod
    def failure(cls, code: str, message: str) -> Result:
        return cls(ok=False, error={"code": code, "message": message})

    @classmethod
    def from_json(cls, value: dict, attachments: Sequence[bytes | EncodedPng | RelayedPixels] = ()) -> Result:
        """The inverse of ``to_json(inline_images=True)``, or of :meth:`to_wire` given its attachments."""
        return cls(ok=bool(value["ok"]), data=value.get("data") or {},
                   images=[RenderedImage.from_json(item, attachments) for item in value.get("images") or []],
                   error=value.get("error"), artifacts=list(value.get("artifacts") or []))

    def to_wire(self, streamed: Sequence[RenderedImage] = ()) -> tuple[dict, list[bytes]]:
        """The JSON form without the images' pixels, each image naming its view among the attachments: how a viewer
        in another process sends its answer, so the receiver relays the PNGs as they are (it base64-encodes them
        once, for its own client, as an in-process registry would) and parses only a small line. The views of
        ``streamed`` images were sent already (as raw pixels), in that order, as the first attachments; the PNGs of
        the others are returned, to follow them."""
        positions = {id(image): number for number, image in enumerate(streamed)}
        encode_all([image for image in self.images if id(image) not in positions])
        body = self.to_json(inline_images=False)
        attachments: list[bytes] = []
        for image, item in zip(self.images, body["images"]):
            if id(image) not in positions:
                positions[id(image)] = len(streamed) + len(attachments)
                attachments.append(image.png_bytes())
            item[PNG_ATTACHMENT] = positions[id(image)]
        return body, attachments

    def to_json(self, inline_images: bool = True) -> dict:
        if inline_images:
            encode_all(self.images)
        return {
            "ok": self.ok,
            "data": self.data,
            "images": [image.to_json(inline=inline_images) for image in self.images],
            "error": self.error,
            "artifacts": self.artifacts,
        }

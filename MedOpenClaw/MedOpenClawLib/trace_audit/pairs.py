"""Means over every pair of a case's repeated runs, at a cost that grows with the runs, not with their pairs.

``bench run --repeats`` allows 1000 runs of a case (half a million pairs). A pairwise measure of small records
(view agreement, box IoU) is evaluated once per pair of *distinct* records, weighted by how often each occurs, so
runs that ended alike cost nothing extra; when even the distinct pairs exceed :data:`PAIR_SAMPLE`, the mean is
taken over a seeded uniform sample of that many run pairs (the result says so). The mean absolute pixel
difference of the runs' final images is exact: each image is decoded once, and per pixel the sum of |a - b| over
all pairs follows from the sorted values (sum of x_(k) * (2k - n + 1)), O(n log n) per pixel.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

PAIR_SAMPLE = 20_000  # distinct pairs measured one by one at most; beyond it, this many sampled run pairs
_SAMPLE_SEED = 0  # the same runs give the same sampled mean
_CHUNK_VALUES = 1 << 21  # pixel values sorted at a time (bounds the float64 working copy to 16 MB)


def canonical(value: Any) -> str:
    """A key equal for equal JSON-like values (what the pairwise measures compare)."""
    return json.dumps(value, sort_keys=True, default=repr)


def pair_mean(items: list, measure: Callable[[Any, Any], float],
              key: Callable[[Any], Hashable] = canonical) -> tuple[float | None, bool]:
    """(mean of ``measure`` over all unordered pairs of ``items``, whether it was sampled); None below two items.

    ``measure`` must depend only on ``key`` of its arguments: items with one key are measured once."""
    count = len(items)
    if count < 2:
        return None, False
    groups: dict[Hashable, list] = {}
    for item in items:
        groups.setdefault(key(item), [item, 0])[1] += 1
    distinct = list(groups.values())
    pairs = count * (count - 1) / 2
    if len(distinct) * (len(distinct) + 1) // 2 <= PAIR_SAMPLE:
        total = 0.0
        for index, (first, times) in enumerate(distinct):
            if times > 1:
                total += measure(first, first) * times * (times - 1) / 2
            for second, other in distinct[index + 1:]:
                total += measure(first, second) * times * other
        return total / pairs, False
    draw = random.Random(_SAMPLE_SEED)
    total = 0.0
    for _ in range(PAIR_SAMPLE):
        first, second = draw.sample(range(count), 2)
        total += measure(items[first], items[second])
    return total / PAIR_SAMPLE, True


def _decoded(path: Path, size: tuple[int, int] | None):
    """The grey levels of a PNG (resized to ``size`` when given and different), or None when unreadable."""
    import numpy as np  # numpy and Pillow: optional here, only runs that kept their images need them
    from PIL import Image

    try:
        with Image.open(path) as opened:
            image = opened.convert("L")
            if size is not None and image.size != size:
                image = image.resize(size)
    except (OSError, ValueError):
        return None
    return np.asarray(image, dtype=np.uint8).ravel(), image.size


def pixel_difference_sum(paths: list[Path]) -> tuple[float, int]:
    """(sum over all pairs of the mean absolute difference, 0..1, of their images; the number of pairs).

    Each image is decoded once; every image is resized to the first readable one's size; unreadable ones drop
    out (with their pairs)."""
    import numpy as np  # optional heavy dependency (see _decoded)

    images, size = [], None
    for path in paths:
        decoded = _decoded(path, size)
        if decoded is not None:
            images.append(decoded[0])
            size = decoded[1]
    count = len(images)
    if count < 2:
        return 0.0, 0
    pixels = images[0].size
    stack = np.empty((pixels, count), dtype=np.uint8)
    for column, image in enumerate(images):
        stack[:, column] = image
    weights = 2.0 * np.arange(count) - count + 1  # sorted x_(k) appears +k times as the larger, (n-1-k) as smaller
    total = 0.0
    rows = max(1, _CHUNK_VALUES // count)
    for start in range(0, pixels, rows):
        block = np.sort(stack[start:start + rows], axis=1)
        total += float((block @ weights).sum())
    return total / pixels / 255.0, count * (count - 1) // 2

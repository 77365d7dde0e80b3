"""matplotlib on the Agg backend, and how every report figure is written (PNG and SVG, reproducible SVG)."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    import matplotlib  # optional heavy dependency (the report extra): imported where a figure is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(figure, out_dir: Path, stem: str) -> list[str]:
    """``stem``.png and ``stem``.svg, the same report giving the same bytes: no date in the SVG, and its element
    ids (clip paths, glyphs) hashed with a fixed salt, not with the fresh uuid4 matplotlib takes per id unless
    ``svg.hashsalt`` is set."""
    import matplotlib

    names = []
    for suffix in ("png", "svg"):
        path = out_dir / f"{stem}.{suffix}"
        with matplotlib.rc_context({"svg.hashsalt": "medopenclaw-report"}):
            figure.savefig(path, dpi=120, bbox_inches="tight", metadata={"Date": None} if suffix == "svg" else None)
        names.append(path.name)
    pyplot().close(figure)
    return names

"""matplotlib on the Agg backend, and how every report figure is written (PNG and SVG, reproducible SVG)."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    import matplotlib  # optional heavy dependency (the report extra): imported where a figure is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(figure, out_dir: Path, stem: str) -> list[str]:
    """``stem``.png and ``stem``.svg (no date in the SVG: the same report, the same bytes)."""
    names = []
    for suffix in ("png", "svg"):
        path = out_dir / f"{stem}.{suffix}"
        figure.savefig(path, dpi=120, bbox_inches="tight", metadata={"Date": None} if suffix == "svg" else None)
        names.append(path.name)
    pyplot().close(figure)
    return names

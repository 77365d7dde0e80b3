"""The applications and their catalog: the one place that knows every toolset.

Each application's registry is built here (:mod:`.radiology`: the viewer, evidence and operator toolsets over a
Slicer scene; pathology: :func:`~..pathology.actions.build_pathology_registry`). ``resources/actions.json`` is the
listing of every action, generated from the toolsets (``python scripts/update_catalog.py``; a test fails when it is
stale), so a front-end lists its tools without importing the viewer (importing Slicer's libraries alone takes
seconds) -- how ``mcp`` answers ``tools/list`` before its viewer has started.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from ..core.applications import APPLICATIONS, check_application
from ..core.formats import FORMATS as CORE_FORMATS
from ..core.formats import describe, neutral_tool
from ..core.registry import ToolCatalog
from ..core.toolset import ActionSpec, Toolset

CATALOG_PATH = Path(__file__).resolve().parent.parent / "resources" / "actions.json"


def toolsets(application: str, track: str) -> list[Toolset]:
    """The toolsets a session of ``application`` on ``track`` is built from (imports the application's viewer)."""
    check_application(application)
    if application == "radiology":
        from .radiology import toolsets_for  # slicer (vtk): seconds to import, only where a scene is built

        return toolsets_for(track)
    from ..pathology.actions import PATHOLOGY  # openslide/tiffslide and Pillow: only where slides are opened

    return [PATHOLOGY]


def generate() -> list[dict]:
    """Every declared action of every application, from the toolsets themselves (slow: imports the viewer)."""
    return [describe(application, action) for application in APPLICATIONS
            for toolset in toolsets(application, "B") for action in toolset.actions]


@lru_cache(maxsize=1)
def _entries() -> tuple[dict, ...]:
    return tuple(json.loads(CATALOG_PATH.read_text(encoding="utf-8")))


def entries(application: str | None = None, track: str | None = None) -> list[dict]:
    """Catalog entries (from ``resources/actions.json``), optionally of one application and offered on one track."""
    if application is not None:
        check_application(application)
    return [json.loads(json.dumps(entry)) for entry in _entries()
            if application in (None, entry["application"]) and (track is None or track in entry["tracks"])]


def specs(application: str, track: str) -> list[ActionSpec]:
    """The actions a session of ``application`` offers on ``track``, without importing its viewer."""
    return [ActionSpec.from_description(entry) for entry in entries(application, track)]


def paper_tools(application: str) -> tuple[str, ...]:
    """The tools the paper's agents see (MedFlow-Bench Table 9 or 10), from each action's ``paper`` field."""
    return tuple(entry["name"] for entry in entries(application) if entry["paper"])


def inspect_tools(application: str) -> frozenset[str]:
    """The actions whose call inspects the image (the benchmark's "inspect" workflow stage), from each action's
    ``inspects`` field."""
    return frozenset(entry["name"] for entry in entries(application) if entry["inspects"])


def vendor_tool(dialect: str):
    """One action in a model API's dialect, by the providers' one converter of neutral tools."""

    def convert(spec: ActionSpec, application: str) -> dict:
        from ..providers import tool_schemas  # providers/ loads the vendors' SDKs (openai, anthropic)

        if dialect == "anthropic":
            return tool_schemas.anthropic_tools([neutral_tool(spec)])[0]
        return tool_schemas.openai_tools([neutral_tool(spec)], dialect=dialect)[0]

    return convert


# format name -> how one action is written in it: the core's and the model APIs' dialects
FORMATS = {**CORE_FORMATS, "openai": vendor_tool("openai"), "gemini": vendor_tool("gemini"),
           "anthropic": vendor_tool("anthropic")}


def serialize(fmt: str, spec: ActionSpec, application: str) -> dict:
    """One action of ``application`` written in ``fmt`` (one of :data:`FORMATS`)."""
    return FORMATS[fmt](spec, application)


def tools(catalog: ToolCatalog, fmt: str = "neutral") -> list[dict]:
    """The actions a registry offers on its session's track, in one of :data:`FORMATS`."""
    return [serialize(fmt, action, "") for action in catalog.actions()]

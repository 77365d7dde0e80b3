"""One catalog of every action the runtime offers -- radiology (viewer, evidence, Track-B operators) and pathology
(the QuPath-style actions) -- and the one place that writes it out for a front-end or a document.

The actions are declared beside their handlers (:class:`~.registry.Toolset`); this module lists them per
application and serializes a description one way per target: the provider-neutral ``{name, description,
parameters}`` (what ``providers/`` turns into a vendor's dialect), an MCP tool, the REST listing and the README
table. ``resources/actions.json`` is the same listing generated from the toolsets
(``python scripts/update_catalog.py``; a test fails when it is stale), so a front-end can list its tools without
importing the viewer (importing Slicer's libraries alone takes seconds) -- how ``mcp`` answers ``tools/list``
before its viewer has started.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from .registry import ActionSpec, Toolset

# the one vocabulary of application kinds: catalog entries, session_config "app", worker builders, module specs
APPLICATIONS = ("radiology", "pathology")
RADIOLOGY, PATHOLOGY = APPLICATIONS
# what traces written before that vocabulary call them in session_config "app"
FORMER_APPLICATION_NAMES = {"slicer": RADIOLOGY, "wsi": PATHOLOGY}
TRACKS = ("A", "B")
CATALOG_PATH = Path(__file__).resolve().parent / "resources" / "actions.json"


def toolsets(application: str, track: str) -> list[Toolset]:
    """The toolsets a session of ``application`` on ``track`` is built from (imports the viewer)."""
    if application == "radiology":
        from .session import toolsets_for

        return toolsets_for(track)
    if application == "pathology":
        from .pathology.actions import PATHOLOGY

        return [PATHOLOGY]
    raise ValueError(f"application must be one of {', '.join(APPLICATIONS)}, got {application!r}")


def application_named(name: object) -> str:
    """The application a trace's ``app`` names (older traces say ``slicer``/``wsi``); ValueError for others."""
    application = FORMER_APPLICATION_NAMES.get(name, name) if isinstance(name, str) else name
    if application not in APPLICATIONS:
        raise ValueError(f"unknown application {name!r}; expected one of {', '.join(APPLICATIONS)}")
    return application


def describe(application: str, spec: ActionSpec) -> dict:
    """The catalog entry of one action (also the REST ``describe`` format)."""
    return {"application": application, **spec.describe()}


def generate() -> list[dict]:
    """Every declared action of every application, from the toolsets themselves (slow: imports the viewer)."""
    return [describe(application, action) for application in APPLICATIONS
            for toolset in toolsets(application, "B") for action in toolset.actions]


@lru_cache(maxsize=1)
def _entries() -> tuple[dict, ...]:
    return tuple(json.loads(CATALOG_PATH.read_text(encoding="utf-8")))


def entries(application: str | None = None, track: str | None = None) -> list[dict]:
    """Catalog entries (from ``resources/actions.json``), optionally of one application and offered on one track."""
    if application is not None and application not in APPLICATIONS:
        raise ValueError(f"application must be one of {', '.join(APPLICATIONS)}, got {application!r}")
    return [json.loads(json.dumps(entry)) for entry in _entries()
            if application in (None, entry["application"]) and (track is None or track in entry["tracks"])]


def specs(application: str, track: str) -> list[ActionSpec]:
    """The actions a session of ``application`` offers on ``track``, without importing its viewer."""
    return [ActionSpec.from_description(entry) for entry in entries(application, track)]


# ------------------------------------------------------------------------------------------------ serializers
def neutral_tool(spec: ActionSpec) -> dict:
    """Provider-neutral: what ``providers/`` converts into each model API's tool dialect."""
    return {"name": spec.name, "description": spec.description, "parameters": spec.parameters}


def mcp_tool(spec: ActionSpec) -> dict:
    return {"name": spec.name, "description": spec.description, "inputSchema": spec.parameters}


def vendor_tool(dialect: str):
    """One action in a model API's dialect, by the providers' one converter of neutral tools."""

    def convert(spec: ActionSpec, application: str) -> dict:
        from .providers import tool_schemas

        if dialect == "anthropic":
            return tool_schemas.anthropic_tools([neutral_tool(spec)])[0]
        return tool_schemas.openai_tools([neutral_tool(spec)], dialect=dialect)[0]

    return convert


# format name -> how one action is written in it
FORMATS = {
    "describe": lambda spec, application: describe(application, spec),
    "neutral": lambda spec, application: neutral_tool(spec),
    "mcp": lambda spec, application: mcp_tool(spec),
    "openai": vendor_tool("openai"),
    "gemini": vendor_tool("gemini"),
    "anthropic": vendor_tool("anthropic"),
}


def serialize(fmt: str, spec: ActionSpec, application: str) -> dict:
    """One action of ``application`` written in ``fmt`` (one of :data:`FORMATS`)."""
    return FORMATS[fmt](spec, application)


def markdown_table(items: Iterable[dict]) -> str:
    """A Markdown table of catalog entries (``*`` marks a required argument)."""
    lines = ["| tool | application | role | tracks | arguments | purpose |", "| --- | --- | --- | --- | --- | --- |"]
    for entry in items:
        properties = entry["parameters"].get("properties", {})
        required = set(entry["parameters"].get("required", []))
        arguments = "; ".join(f"`{name}`" + ("*" if name in required else "") for name in properties) or "–"
        lines.append(f"| `{entry['name']}` | {entry['application']} | {entry['role']} | {', '.join(entry['tracks'])} "
                     f"| {arguments} | {entry['description']} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ portability
# Keywords every consumer of a tool schema understands alike: MCP clients validating with ajv in strict mode
# (the MCP Inspector), OpenAI's and Anthropic's tool schemas, and what providers/ maps onto Gemini's subset.
TYPE_KEYWORDS = {
    "object": {"properties", "required", "additionalProperties"},
    "array": {"items", "minItems", "maxItems", "uniqueItems"},
    "string": {"minLength", "maxLength", "pattern", "enum"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum"},
    "integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum"},
    "boolean": {"enum"},
    "null": set(),
}
ANY_TYPE_KEYWORDS = {"type", "description", "default", "title"}


def portability_problems(schema: object, where: str = "") -> list[str]:
    """Why ``schema`` is not portable, one line per problem (empty when it is): every node names one ``type``
    (or is an ``anyOf`` of typed branches), uses only keywords of that type, and lists in ``required`` only
    properties it defines; no boolean schemas, no type lists, no combinators at the root."""
    if not isinstance(schema, dict):
        return [f"{where or '/'}: a schema must be an object, not {json.dumps(schema)}"]
    place = where or "/"
    if "anyOf" in schema:
        if not where:
            return ["/: anyOf at the root of a tool schema"]
        problems = [f"{place}: {key} beside anyOf" for key in sorted(set(schema) - {"anyOf", "description"})]
        for index, branch in enumerate(schema["anyOf"]):
            problems += portability_problems(branch, f"{where}/anyOf/{index}")
        return problems
    kind = schema.get("type")
    if not isinstance(kind, str) or kind not in TYPE_KEYWORDS:
        return [f"{place}: needs one type of {', '.join(TYPE_KEYWORDS)}, has {json.dumps(kind)}"]
    if not where and kind != "object":
        return [f"/: a tool's input schema must be an object, is {kind}"]
    problems = [f"{place}: {key} is not a portable {kind} keyword"
                for key in sorted(set(schema) - TYPE_KEYWORDS[kind] - ANY_TYPE_KEYWORDS)]
    properties = schema.get("properties", {})
    problems += [f"{place}: required {name!r} is not among its properties"
                 for name in schema.get("required", []) if name not in properties]
    if schema.get("additionalProperties", False) is not False:
        problems.append(f"{place}: additionalProperties must be false or absent")
    for name, value in properties.items():
        problems += portability_problems(value, f"{where}/{name}")
    if "items" in schema:
        problems += portability_problems(schema["items"], f"{where}/items")
    return problems

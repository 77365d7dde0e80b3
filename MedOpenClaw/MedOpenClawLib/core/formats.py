"""How an action is written out for a front-end or a document: the catalog entry (also the REST ``describe``
format), the provider-neutral ``{name, description, parameters}`` (what ``providers/`` turns into a vendor's
dialect), an MCP tool and the README table; and the check that a schema is portable to every consumer."""

from __future__ import annotations

import json
from collections.abc import Iterable

from .toolset import ActionSpec


def describe(application: str, spec: ActionSpec) -> dict:
    """The catalog entry of one action (also the REST ``describe`` format)."""
    return {"application": application, **spec.describe()}


# ------------------------------------------------------------------------------------------------ serializers
def neutral_tool(spec: ActionSpec) -> dict:
    """Provider-neutral: what ``providers/`` converts into each model API's tool dialect."""
    return {"name": spec.name, "description": spec.description, "parameters": spec.parameters}


def mcp_tool(spec: ActionSpec) -> dict:
    return {"name": spec.name, "description": spec.description, "inputSchema": spec.parameters}


# format name -> how one action is written in it (the vendors' dialects are added by :mod:`..apps`, which knows
# the providers' converter)
FORMATS = {
    "describe": lambda spec, application: describe(application, spec),
    "neutral": lambda spec, application: neutral_tool(spec),
    "mcp": lambda spec, application: mcp_tool(spec),
}


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

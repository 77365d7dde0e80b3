"""Neutral tool descriptions ``{name, description, parameters}`` in each server's dialect -- the one place that
converts them, used by every model-facing path (providers, the REST/MCP tool listings).

- OpenAI Chat Completions (and vLLM, Ollama, llama.cpp, Mistral): ``{"type": "function", "function": {...}}``
  with the JSON Schema as is (non-strict function calling accepts full JSON Schema);
- Anthropic Messages: ``{"name", "description", "input_schema"}``;
- Gemini (its OpenAI endpoint too) accepts an OpenAPI 3.0 *subset* (ai.google.dev/api/caching#Schema): no
  ``additionalProperties``, ``const``, ``oneOf``, ``exclusiveMinimum``, ``uniqueItems`` or type lists, which are
  rewritten to the nearest accepted form (``enum: [v]``, ``anyOf``, ``minimum``, ``nullable``) or dropped;
- OpenAI strict mode (``"strict": true``; platform.openai.com/docs/guides/structured-outputs, "Supported schemas"):
  every object has ``additionalProperties: false`` and lists *every* property in ``required`` (an optional one is
  made nullable: ``"type": [t, "null"]``, and the model sends null for "not given", which
  :func:`drop_strict_nulls` removes again before the call is executed); only the documented keywords (strings:
  ``pattern``, ``format``; numbers: ``minimum``, ``maximum``, ``exclusive*``, ``multipleOf``; arrays:
  ``minItems``, ``maxItems``; ``enum``, ``const``, ``anyOf`` below the root) -- ``default`` becomes part of the
  description, ``minLength``, ``maxLength`` and ``uniqueItems`` are dropped.

What a model reads in a request is :func:`concise`: the keywords only a validator needs are left out (the registry
checks every call against the full schema and names the problem), since the tool list is resent every round.
"""

from __future__ import annotations

import json
from typing import Any

GEMINI_KEYS = frozenset({"type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
                         "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
                         "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum",
                         "maximum"})


def gemini_schema(schema: Any) -> Any:
    """``schema`` rewritten into Gemini's accepted subset (see the module docstring)."""
    if isinstance(schema, list):
        return [gemini_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: gemini_schema(item) for name, item in value.items()}
        elif key == "type" and isinstance(value, list):
            types = [item for item in value if item != "null"]
            out["type"] = types[0] if types else "string"
            if "null" in value:
                out["nullable"] = True
        elif key == "const":
            out["enum"] = [value]
        elif key == "oneOf":
            out["anyOf"] = gemini_schema(value)
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, (int, float)):
            out.setdefault("minimum" if key == "exclusiveMinimum" else "maximum", value)
        elif key in GEMINI_KEYS:
            out[key] = gemini_schema(value)
    if "enum" in out and out.get("type") not in (None, "string"):
        del out["enum"]  # Gemini takes enums of strings only; the registry still validates the value
    return out


# keywords that only a validator needs (the registry validates every call against the full schema)
VALIDATOR_ONLY = frozenset({"additionalProperties", "pattern", "minLength", "maxLength", "uniqueItems"})
STRICT_KEYS = frozenset({"type", "description", "enum", "const", "properties", "required", "additionalProperties",
                         "items", "anyOf", "pattern", "format", "multipleOf", "minimum", "maximum",
                         "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems"})


def _without(schema: Any, keys: frozenset) -> Any:
    if isinstance(schema, list):
        return [_without(item, keys) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {key: ({name: _without(item, keys) for name, item in value.items()} if key == "properties"
                  else _without(value, keys))
            for key, value in schema.items() if key == "properties" or key not in keys}


def concise(tools: list[dict]) -> list[dict]:
    """Neutral tools as a model reads them in a request: without :data:`VALIDATOR_ONLY` keywords."""
    return [{**tool, "parameters": _without(tool["parameters"], VALIDATOR_ONLY)} for tool in tools]


def _accepts_null(schema: dict) -> bool:
    kinds = schema.get("type")
    return "null" in (kinds if isinstance(kinds, list) else [kinds]) or any(
        isinstance(option, dict) and option.get("type") == "null" for option in schema.get("anyOf") or [])


def _nullable(schema: dict) -> dict:
    if _accepts_null(schema):
        return schema
    if isinstance(schema.get("type"), str):  # OpenAI's own form; an enum lists null too
        return {**schema, "type": [schema["type"], "null"],
                **({"enum": [*schema["enum"], None]} if "enum" in schema else {})}
    return {"anyOf": [{key: value for key, value in schema.items() if key != "description"}, {"type": "null"}],
            **({"description": schema["description"]} if "description" in schema else {})}


def strict_schema(schema: Any, required: bool = True) -> Any:
    """``schema`` in OpenAI's strict-mode subset (see the module docstring); ``required=False``: nullable."""
    if isinstance(schema, list):
        return [strict_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            needed = set(schema.get("required") or [])
            out[key] = {name: strict_schema(item, name in needed) for name, item in value.items()}
            out["required"] = list(value)
            out["additionalProperties"] = False
        elif key in ("items", "anyOf"):
            out[key] = strict_schema(value)
        elif key in STRICT_KEYS and key not in ("required", "additionalProperties"):
            out[key] = value
    if "default" in schema:
        default = f"(default {json.dumps(schema['default'])})"
        out["description"] = f"{out['description']} {default}" if out.get("description") else default
    if out.get("type") == "object" and "properties" not in out:
        out.update(properties={}, required=[], additionalProperties=False)
    return out if required else _nullable(out)


def strict_optional(tools: list[dict]) -> dict[str, frozenset[str]]:
    """Per tool, the arguments strict mode made nullable: there a null means "not given" (an argument that takes
    null itself keeps its null)."""
    optional = {}
    for tool in tools:
        parameters = tool["parameters"]
        optional[tool["name"]] = frozenset(
            name for name, item in (parameters.get("properties") or {}).items()
            if name not in (parameters.get("required") or []) and not _accepts_null(item))
    return optional


def drop_strict_nulls(arguments: dict, optional: frozenset[str]) -> dict:
    """A strict-mode call's arguments without the nulls standing for an optional argument not given."""
    return {key: value for key, value in arguments.items() if value is not None or key not in optional}


def openai_tools(tools: list[dict], dialect: str = "openai") -> list[dict]:
    """Chat Completions tool definitions; ``dialect="gemini"`` rewrites schemas into Gemini's subset,
    ``"openai-strict"`` into strict mode's."""
    if dialect == "openai-strict":
        return [{"type": "function", "function": {"name": tool["name"], "description": tool.get("description", ""),
                                                  "strict": True, "parameters": strict_schema(tool["parameters"])}}
                for tool in tools]
    convert = gemini_schema if dialect == "gemini" else (lambda schema: schema)
    return [{"type": "function", "function": {"name": tool["name"], "description": tool.get("description", ""),
                                              "parameters": convert(tool["parameters"])}} for tool in tools]


def anthropic_tools(tools: list[dict]) -> list[dict]:
    return [{"name": tool["name"], "description": tool.get("description", ""), "input_schema": tool["parameters"]}
            for tool in tools]

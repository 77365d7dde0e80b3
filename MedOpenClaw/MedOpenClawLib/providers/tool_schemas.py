"""Neutral tool descriptions ``{name, description, parameters}`` in each server's dialect -- the one place that
converts them, used by every model-facing path (providers, the REST/MCP tool listings).

- OpenAI Chat Completions (and vLLM, Ollama, llama.cpp, Mistral): ``{"type": "function", "function": {...}}``
  with the JSON Schema as is (non-strict function calling accepts full JSON Schema);
- Anthropic Messages: ``{"name", "description", "input_schema"}``;
- Gemini (its OpenAI endpoint too) accepts an OpenAPI 3.0 *subset* (ai.google.dev/api/caching#Schema): no
  ``additionalProperties``, ``const``, ``oneOf``, ``exclusiveMinimum``, ``uniqueItems`` or type lists, which are
  rewritten to the nearest accepted form (``enum: [v]``, ``anyOf``, ``minimum``, ``nullable``) or dropped.
"""

from __future__ import annotations

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


def openai_tools(tools: list[dict], dialect: str = "openai") -> list[dict]:
    """Chat Completions tool definitions; ``dialect="gemini"`` rewrites schemas into Gemini's subset."""
    convert = gemini_schema if dialect == "gemini" else (lambda schema: schema)
    return [{"type": "function", "function": {"name": tool["name"], "description": tool.get("description", ""),
                                              "parameters": convert(tool["parameters"])}} for tool in tools]


def anthropic_tools(tools: list[dict]) -> list[dict]:
    return [{"name": tool["name"], "description": tool.get("description", ""), "input_schema": tool["parameters"]}
            for tool in tools]

"""Tool schemas are portable across MCP clients, checked by a validator this project did not write: every tool the
MCP server lists (radiology and pathology, track B: every action) and every vendor dialect's parameters, compiled
by Ajv in strict mode under JSON Schema draft-07 and 2020-12 -- the checks of the MCP Inspector's strict mode (49
warnings on this project's schemas before they were made portable) and of the TypeScript SDK's result validation.

Ajv runs in Node.js from the pinned packages in ``node/`` (the ``node_clients`` fixture of this folder's conftest.py);
without Node.js the test is skipped, saying so.
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import Future
from pathlib import Path

import anyio
import pytest
from mcp.client import Client

from MedOpenClawLib import apps
from MedOpenClawLib.core.applications import APPLICATIONS
from MedOpenClawLib.core.toolset import ActionSpec
from MedOpenClawLib.server import mcp as mcp_server

VENDOR_SCHEMA = {"openai": ("function", "parameters"), "gemini": ("function", "parameters"),
                 "anthropic": ("input_schema",)}


@pytest.fixture(scope="module")
def ajv(node_clients: Path) -> Path:
    return node_clients / "check_schemas.mjs"


def strict_problems(script: Path, items: list[dict]) -> list[dict]:
    completed = subprocess.run(["node", str(script)], input=json.dumps(items), capture_output=True, text=True,
                               timeout=120, check=True)
    return json.loads(completed.stdout)


def listed_tools(application: str) -> list[dict]:
    """tools/list as an MCP client receives it from the server (the SDK's own client, in memory)."""
    listing = apps.specs(application, "B")
    server = mcp_server.build_server(mcp_server.SharedSession(Future(), lambda function: Future(), listing),
                                     application)

    async def main() -> list[dict]:
        async with Client(server) as client:
            return [tool.model_dump(by_alias=True, mode="json", exclude_none=True)
                    for tool in (await client.list_tools()).tools]

    return anyio.run(main)


def test_every_listed_tool_schema_compiles_in_ajv_strict_mode(ajv):
    items = []
    for application in APPLICATIONS:
        for tool in listed_tools(application):
            items += [{"where": f"mcp:{application}:{tool['name']}:{key}", "schema": tool[key]}
                      for key in ("inputSchema", "outputSchema")]
        for entry in apps.entries(application, "B"):
            for fmt, path in VENDOR_SCHEMA.items():
                schema = apps.serialize(fmt, ActionSpec.from_description(entry), application)
                for key in path:
                    schema = schema[key]
                items.append({"where": f"{fmt}:{application}:{entry['name']}", "schema": schema})
    assert len(items) > 4 * len(apps.entries(None, "B"))
    assert strict_problems(ajv, items) == []


def test_the_check_finds_what_strict_clients_warn_about(ajv):
    """The checker is not vacuous: a type list, a keyword of another type, an undefined required property and an
    unknown keyword are each reported, in both dialects."""
    schema = {"type": "object", "properties": {"x": {"type": ["string", "null"], "minimum": 1}},
              "required": ["y"], "optional": True}
    problems = strict_problems(ajv, [{"where": "bad", "schema": schema}])
    text = " ".join(problem["problem"] for problem in problems)
    assert {problem["dialect"] for problem in problems} == {"draft-07", "2020-12"}
    assert all(word in text for word in ("strictRequired", "strictTypes", 'unknown keyword: "optional"'))

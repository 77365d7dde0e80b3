"""Tool schemas are portable across MCP clients, checked by a validator this project did not write: every tool the
MCP server lists (radiology and pathology, track B: every action) and every vendor dialect's parameters, compiled
by Ajv in strict mode under JSON Schema draft-07 and 2020-12 -- the checks of the MCP Inspector's strict mode (49
warnings on this project's schemas before they were made portable) and of the TypeScript SDK's result validation.

Ajv runs in Node.js from the pinned packages in ``node/`` (the ``node_clients`` fixture of Testing/Python/conftest.py);
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


# the checker's control (test_the_check_finds_what_strict_clients_warn_about), compiled last in the same run
NOT_PORTABLE = {"where": "bad", "schema": {
    "type": "object", "properties": {"x": {"type": ["string", "null"], "minimum": 1}}, "required": ["y"],
    "optional": True}}


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


def portable_items() -> list[dict]:
    """Every listed tool's input and output schema and every vendor dialect's parameters, each named by where."""
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
    return items


@pytest.fixture(scope="module")
def checked(node_clients: Path) -> tuple[list[dict], list[dict]]:
    """The portable items and the problems Ajv found in them and in NOT_PORTABLE: one Node process for both tests
    (starting it and loading Ajv is a fifth of the whole check)."""
    items = portable_items()
    return items, strict_problems(node_clients / "check_schemas.mjs", [*items, NOT_PORTABLE])


def test_every_listed_tool_schema_compiles_in_ajv_strict_mode(checked):
    items, problems = checked
    assert len(items) > 4 * len(apps.entries(None, "B"))
    assert [problem for problem in problems if problem["where"] != NOT_PORTABLE["where"]] == []


def test_the_check_finds_what_strict_clients_warn_about(checked):
    """The checker is not vacuous: a type list, a keyword of another type, an undefined required property and an
    unknown keyword are each reported, in both dialects."""
    problems = [problem for problem in checked[1] if problem["where"] == NOT_PORTABLE["where"]]
    text = " ".join(problem["problem"] for problem in problems)
    assert {problem["dialect"] for problem in problems} == {"draft-07", "2020-12"}
    assert all(word in text for word in ("strictRequired", "strictTypes", 'unknown keyword: "optional"'))

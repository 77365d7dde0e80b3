"""Fixtures of the front-end tests."""

from __future__ import annotations

from pathlib import Path

import pytest

NODE = Path(__file__).resolve().parent / "node"


@pytest.fixture(scope="session")
def node_clients() -> Path:
    """The folder of the Node.js clients this project did not write (Ajv, the TypeScript MCP SDK), their pinned
    packages installed (package-lock.json; scripts/setup_env.sh runs ``npm ci`` there, and so does this fixture
    when they are missing). Skips, saying why, without Node.js or when the packages cannot be installed."""
    import shutil
    import subprocess

    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed: the checks with Ajv and the TypeScript MCP SDK need node (>= 18)")
    wanted = ("ajv", "@modelcontextprotocol/sdk")
    if not all((NODE / "node_modules" / name / "package.json").is_file() for name in wanted):
        if shutil.which("npm") is None:
            pytest.skip(f"the Node.js packages of {NODE} are not installed and npm is missing: npm ci --prefix {NODE}")
        installed = subprocess.run(["npm", "ci", "--prefix", str(NODE), "--no-audit", "--no-fund", "--ignore-scripts"],
                                   capture_output=True, text=True, timeout=300)
        if installed.returncode != 0:
            pytest.skip(f"npm ci --prefix {NODE} failed (offline?): {installed.stderr.strip()[-300:]}")
    return NODE

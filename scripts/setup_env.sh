#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv from the repository's own files.
# Idempotent: reinstalls only when pyproject.toml changed since the last successful install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${MEDOPENCLAW_VENV:-$root/.venv}"
stamp="$venv/.medopenclaw-installed"
want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)"

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  # torch first and pinned: the CPU build on local disk; an unpinned torch would pull a multi-GB CUDA build
  "$venv/bin/python" -m pip install --quiet "torch==2.13.0"
  "$venv/bin/python" -m pip install --quiet -e "$root[test,report,ray,vista3d,bedrock,vertex]"  # vista3d: torch + monai, the suite tests VISTA3D
  echo "$want" > "$stamp"
fi

# the Node.js clients the suite runs (Ajv strict mode on the tool schemas, the TypeScript MCP SDK's client), pinned
# by their package-lock.json; without Node.js those tests are skipped, saying so
node_clients="$root/Testing/Python/server/node"
lock="$(sha256sum "$node_clients/package-lock.json" | cut -d' ' -f1)"
if command -v npm >/dev/null && [ "$(cat "$node_clients/node_modules/.medopenclaw-installed" 2>/dev/null)" != "$lock" ]; then
  if npm ci --prefix "$node_clients" --no-audit --no-fund --ignore-scripts --silent; then
    echo "$lock" > "$node_clients/node_modules/.medopenclaw-installed"
  else
    echo "npm ci in $node_clients failed: the tests that need it will try again or be skipped" >&2
  fi
fi

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
  "$venv/bin/python" -m pip install --quiet -e "$root[test,report,ray,vista3d]"  # vista3d: torch + monai, the suite tests VISTA3D
  echo "$want" > "$stamp"
fi

# Ajv for the strict-mode check of the MCP tool schemas (Testing/Python/server/test_schema_portability.py), pinned by
# its package-lock.json; skipped without Node.js (the test then says so)
ajv="$root/Testing/Python/server/ajv"
lock="$(sha256sum "$ajv/package-lock.json" | cut -d' ' -f1)"
if command -v npm >/dev/null && [ "$(cat "$ajv/node_modules/.medopenclaw-installed" 2>/dev/null)" != "$lock" ]; then
  if npm ci --prefix "$ajv" --no-audit --no-fund --ignore-scripts --silent; then
    echo "$lock" > "$ajv/node_modules/.medopenclaw-installed"
  else
    echo "npm ci in $ajv failed: the Ajv schema check will try again or be skipped" >&2
  fi
fi

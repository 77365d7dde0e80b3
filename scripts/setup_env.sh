#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv from the repository's own files, one line per
# step (the installers' output goes to .venv/setup.log). Idempotent: reinstalls only when pyproject.toml changed
# since the last successful install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${MEDOPENCLAW_VENV:-$root/.venv}"
stamp="$venv/.medopenclaw-installed"
want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)"
mkdir -p "$venv"
steps_log="$venv/setup.log"
# shellcheck source=scripts/steps.sh
source "$root/scripts/steps.sh"

if [ ! -x "$venv/bin/python" ]; then
  step "set-up 1/4: virtual environment $venv" python3 -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # torch first and pinned, with pip: the CPU build may be a local wheel that only pip's configuration finds
  # (find-links); an unpinned torch would pull a multi-GB CUDA build
  step "set-up 2/4: torch==2.13.0 (CPU build, pip)" "$venv/bin/python" -m pip install --quiet "torch==2.13.0"
  # vista3d: torch + monai, the suite tests VISTA3D
  step "set-up 3/4: MedOpenClaw and its packages (pip)" \
    "$venv/bin/python" -m pip install --quiet -e "$root[test,report,ray,vista3d,bedrock,vertex]"
  echo "$want" > "$stamp"
fi

# the Node.js clients the suite runs (Ajv strict mode on the tool schemas, the TypeScript MCP SDK's client, the MCP
# Inspector), pinned by their package-lock.json; without Node.js those tests are skipped, saying so
node_clients="$root/Testing/Python/server/node"
lock="$(sha256sum "$node_clients/package-lock.json" | cut -d' ' -f1)"
if command -v npm >/dev/null && [ "$(cat "$node_clients/node_modules/.medopenclaw-installed" 2>/dev/null)" != "$lock" ]; then
  if (step "set-up 4/4: Node.js clients (npm ci)" \
        npm ci --prefix "$node_clients" --no-audit --no-fund --ignore-scripts --silent); then
    echo "$lock" > "$node_clients/node_modules/.medopenclaw-installed"
  else
    echo "npm ci in $node_clients failed: the tests that need it will try again or be skipped" >&2
  fi
fi

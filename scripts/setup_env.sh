#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv from the repository's own files, one line per
# step (the installers' output goes to .venv/setup.log). Idempotent: reinstalls only when pyproject.toml changed
# since the last successful install. Packages are installed with uv (pinned in scripts/setup-tools.txt; about 10x
# pip's speed, bench/setup.json), or with pip where uv cannot be installed. MEDOPENCLAW_INSTALLER=pip forces pip.
# --no-node-clients: leave out the Node.js clients only the test suite runs (scripts/demo.sh needs none).
set -euo pipefail
node_clients_wanted=yes
if [ "${1:-}" = --no-node-clients ]; then
  node_clients_wanted=no
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--no-node-clients]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${MEDOPENCLAW_VENV:-$root/.venv}"
stamp="$venv/.medopenclaw-installed"
want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)"
extras="test,report,ray,vista3d,bedrock,vertex"  # vista3d: torch + monai, the suite tests VISTA3D
mkdir -p "$venv"
steps_log="$venv/setup.log"
# shellcheck source=scripts/steps.sh
source "$root/scripts/steps.sh"
# shellcheck source=scripts/installer.sh
source "$root/scripts/installer.sh"

install_packages() {  # $1 = label ("uv" or "pip"), then what to install
  local installer="$1"
  shift
  if [ "$installer" = uv ]; then
    "$venv/bin/uv" pip install "${uv_args[@]}" "$@"  # its short output (what it installed) goes to the log
  else
    "$venv/bin/python" -m pip install --quiet "$@"
  fi
}

# the Node.js clients the suite runs (Ajv strict mode on the tool schemas, the TypeScript MCP SDK's client, the MCP
# Inspector), pinned by their package-lock.json; without Node.js those tests are skipped, saying so. npm needs
# nothing the Python steps make, so it runs beside them.
node_clients="$root/Testing/Python/server/node"
lock="$(sha256sum "$node_clients/package-lock.json" | cut -d' ' -f1)"
installed_lock="$(cat "$node_clients/node_modules/.medopenclaw-installed" 2>/dev/null || true)"
node_clients_started=no
if [ "$installed_lock" != "$lock" ] && [ "$node_clients_wanted" = yes ] && command -v npm >/dev/null; then
  background_step "set-up 5/5: Node.js clients (npm ci)" \
    npm ci --prefix "$node_clients" --no-audit --no-fund --ignore-scripts --silent
  node_clients_started=yes
fi

if [ ! -x "$venv/bin/python" ]; then
  step "set-up 1/5: virtual environment $venv" python3 -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  installer=pip
  if [ "${MEDOPENCLAW_INSTALLER:-uv}" = uv ]; then
    if optional_step "set-up 2/5: the installer ($(grep -v '^#' "$root/scripts/setup-tools.txt"), pip)" \
         "$venv/bin/python" -m pip install --quiet --requirement "$root/scripts/setup-tools.txt"; then
      installer=uv
      uv_options "$venv/bin/python"
    else
      echo "set-up: uv could not be installed (see $steps_log): installing with pip instead, which is slower"
    fi
  fi
  # torch first and pinned: its CPU build may be a local wheel that only the configured find-links hold; an
  # unpinned torch would pull a multi-GB CUDA build
  step "set-up 3/5: torch==2.13.0 (CPU build, $installer)" install_packages "$installer" "torch==2.13.0"
  step "set-up 4/5: MedOpenClaw and its packages ($installer)" install_packages "$installer" -e "$root[$extras]"
  echo "$want" > "$stamp"
fi
if [ "$node_clients_started" = yes ]; then
  if finish_background_step; then
    echo "$lock" > "$node_clients/node_modules/.medopenclaw-installed"
  else
    echo "npm ci in $node_clients failed: the tests that need it will try again or be skipped" >&2
  fi
fi
if [ "$installed_lock" != "$lock" ] && [ "$node_clients_wanted" = no ]; then
  echo "set-up 5/5: Node.js clients: left out (only the test suite runs them; scripts/test.sh installs them)"
fi

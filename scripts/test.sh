#!/usr/bin/env bash
# Set up .venv, configure the standalone test project (no Slicer SDK) and run every test through ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup_env.sh"
bash "$root/scripts/setup_slicer_pythons.sh"  # the Python of each supported Slicer release (cached)
venv="${MEDOPENCLAW_VENV:-$root/.venv}"
build="${MEDOPENCLAW_BUILD_DIR:-$root/build}"
export PATH="$venv/bin:$PATH"
mkdir -p "$build"
cmake -S "$root" -B "$build" -DMEDOPENCLAW_STANDALONE_TESTS=ON -DPython3_EXECUTABLE="$venv/bin/python" \
  > "$build/configure.log" 2>&1 \
  || { cat "$build/configure.log"; exit 1; }
ctest --test-dir "$build" --output-on-failure -j "${MEDOPENCLAW_TEST_JOBS:-2}" "$@"

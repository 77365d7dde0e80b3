#!/usr/bin/env bash
# Set up .venv, configure the standalone test project (no Slicer SDK) and run every test through ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup_env.sh"
echo "set-up: the Python of each supported Slicer release (.venv-slicer, cached)"
bash "$root/scripts/setup_slicer_pythons.sh"
venv="${MEDOPENCLAW_VENV:-$root/.venv}"
build="${MEDOPENCLAW_BUILD_DIR:-$root/build}"
export PATH="$venv/bin:$PATH"
mkdir -p "$build"
echo "configure: the standalone test project in $build (log: $build/configure.log)"
cmake -S "$root" -B "$build" -DMEDOPENCLAW_STANDALONE_TESTS=ON -DPython3_EXECUTABLE="$venv/bin/python" \
  > "$build/configure.log" 2>&1 \
  || { cat "$build/configure.log"; exit 1; }
# one group more than the cores: a group spends about a tenth of its time waiting (the deadlines it proves, servers
# and workers starting), which a group per core leaves idle (2 cores: ctest 604-613 s at -j2, 554 s at -j3)
jobs="${MEDOPENCLAW_TEST_JOBS:-$(( $(getconf _NPROCESSORS_ONLN) + 1 ))}"
echo "test: ctest, $jobs at a time (the demo cohort is generated first, into ${MEDOPENCLAW_CACHE:-$build/cohort-cache})"
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@"

#!/usr/bin/env bash
# Set up .venv, then run the reference (oracle) agent on the embedded synthetic demo cohort of every module
# and write the paper-style report. Any extra arguments go to each `bench run` (e.g. --agent random).
# The last line names the report's index.html.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup_env.sh" --no-node-clients  # the Node.js clients are the test suite's
venv="${MEDOPENCLAW_VENV:-$root/.venv}"
# the demo's processes (the runner, its viewers, the cohort's workers) compile each module once, into the venv: uv
# installs no bytecode, and where PYTHONDONTWRITEBYTECODE is set every process compiled all it imported again
# (bench/demo.json: a first demo 220 -> 211 s of CPU, its run phase 29 -> 23 s; the next demo 57 -> 43 s); the
# source tree stays untouched
export PYTHONPYCACHEPREFIX="$venv/pycache" PYTHONDONTWRITEBYTECODE=
out="${MEDOPENCLAW_DEMO_OUT:-$root/out/demo}"
# every module of the registry, each into $out/MODULE (the cohort is generated once: `cohort MODULE k/n` lines)
echo "demo: the reference agent on every module (the summary table follows)"
"$venv/bin/medopenclaw" bench run --module all --agent oracle --out "$out" "$@"
echo "demo: writing the report"
"$venv/bin/medopenclaw" bench report "$out" > "$out/report.json"
echo "demo done: open $out/report/index.html"

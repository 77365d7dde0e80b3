#!/usr/bin/env bash
# Create (or refresh) one virtualenv per supported 3D Slicer release (Testing/SlicerReleases/slicer-*.txt): the
# release's Python (a pyenv interpreter) with only the packages that release bundles, then MedOpenClaw's `core`
# feature packages installed as the module installs them on first use (MedOpenClawLib/core/dependencies.py).
# Idempotent: a venv is rebuilt only when its requirements file or this script changed. A release whose Python is
# not installed is skipped with a warning (its ctest then reports SKIP).
# The release's packages, and the feature's through the module's own install(), are installed with the project
# venv's uv when it has one (scripts/setup_env.sh puts it there: 3.5 s against pip's 26 s for Slicer 5.12's own,
# 3.9 s against pip's 36 s for the `core` feature), else with pip, as slicer.util.pip_install runs it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venvs="${MEDOPENCLAW_SLICER_VENVS:-$root/.venv-slicer}"
uv="${MEDOPENCLAW_VENV:-$root/.venv}/bin/uv"
# shellcheck source=scripts/installer.sh
source "$root/scripts/installer.sh"
pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"

find_python() {  # $1 = X.Y -> an interpreter of that version, or nothing
  local candidate
  for candidate in "$pyenv_root"/versions/"$1".*/bin/python "$(command -v "python$1" || true)"; do
    if [[ -x "$candidate" ]] && "$candidate" -c "import sys, venv; sys.exit(sys.version_info[:2] != tuple(map(int, '$1'.split('.'))))" 2>/dev/null; then
      echo "$candidate"
      return
    fi
  done
}

build_release() {  # $1 = a release's requirements file; its venv, unless it is up to date
  local requirements="$1" release version venv want python
  release="$(basename "$requirements" .txt)"
  version="$(sed -nE 's/^# python: ([0-9]+\.[0-9]+).*/\1/p' "$requirements")"
  venv="$venvs/$release"
  want="$(cat "$requirements" "${BASH_SOURCE[0]}" "$root/scripts/installer.sh" \
    "$root/MedOpenClaw/MedOpenClawLib/core/dependencies.py" | sha256sum | cut -d' ' -f1)"
  if [[ "$(cat "$venv/.medopenclaw-installed" 2>/dev/null)" == "$want" ]]; then
    return
  fi
  python="$(find_python "$version")"
  if [[ -z "$python" ]]; then
    echo "warning: no Python $version for $release (pyenv install $version): its checks will be skipped" >&2
    return
  fi
  rm -rf "$venv"
  # uv makes the venv in a tenth of a second, without pip (python -m venv spends about 6 s CPU installing pip, which
  # only the pip fallback uses): pip's configuration is then read by the project venv's pip
  if [[ -x "$uv" && "${MEDOPENCLAW_INSTALLER:-uv}" == uv ]]; then
    "$uv" venv --quiet --python "$python" "$venv"
    uv_options "$venv/bin/python" "$(dirname "$uv")/python"
    installer=("$uv" pip install --quiet "${uv_args[@]}")
  else
    "$python" -m venv "$venv"
    installer=("$venv/bin/python" -m pip install --quiet)
  fi
  "${installer[@]}" --requirement "$requirements"
  # the `core` feature, by the module's own code path (dependencies.install), the installer in place of
  # slicer.util.pip_install (the same pip arguments); a release the module refuses at load (older than
  # dependencies.MIN_SLICER) never reaches that install, and its Python may be too old for the feature's packages
  # (the models' SDKs need 3.11): its venv stays as Slicer ships it
  MEDOPENCLAW_RELEASE="$release" PYTHONPATH="$root/MedOpenClaw" "$venv/bin/python" - "${installer[@]}" <<'PY'
import os, re, subprocess, sys
from MedOpenClawLib.core.dependencies import install, slicer_release_problem
numbered = re.fullmatch(r"slicer-(\d+)\.(\d+)", os.environ["MEDOPENCLAW_RELEASE"])  # not "slicer-preview"
if numbered and slicer_release_problem(int(numbered[1]), int(numbered[2])):
    sys.exit(0)
installer = sys.argv[1:]  # the installer's command, as the script chose it
left = install(["core"], lambda missing: True, lambda arguments: subprocess.run([*installer, *arguments], check=True))
sys.exit(f"still missing after the install: {left}" if left else 0)
PY
  echo "$want" > "$venv/.medopenclaw-installed"
}

# the releases at once: each venv is its own, uv's cache takes concurrent installs, and
# most of the time is spent waiting on the disk; each release's output is shown after it, a failure's in full
mkdir -p "$venvs"
releases=() pids=() logs=()
for requirements in "$root"/Testing/SlicerReleases/slicer-*.txt; do
  releases+=("$(basename "$requirements" .txt)")
  logs+=("$(mktemp "${TMPDIR:-/tmp}/medopenclaw-slicer-python.XXXXXX")")
  ( set -euo pipefail; build_release "$requirements" ) > "${logs[-1]}" 2>&1 &
  pids+=($!)
done
failed=()
for index in "${!pids[@]}"; do
  if ! wait "${pids[$index]}"; then
    failed+=("${releases[$index]}")
  fi
  cat "${logs[$index]}" >&2
  rm -f "${logs[$index]}"
done
if (( ${#failed[@]} )); then
  echo "set-up of the Slicer release venvs failed: ${failed[*]} (its output is above)" >&2
  exit 1
fi

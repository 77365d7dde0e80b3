# Sourced by the set-up scripts: `step LABEL COMMAND...` runs one set-up step and shows it as one line,
# "LABEL ... 12 s", instead of the installers' own output (pip's warnings, npm's), which goes to $steps_log; a
# step that fails shows the end of that log and stops the script. `optional_step` is a step the set-up can do
# without: a failure is its one line ("failed (exit N)") and its status, for the caller to say what it does instead.
steps_log="${steps_log:-${TMPDIR:-/tmp}/medopenclaw-setup.log}"

optional_step() {
  local label="$1" started status
  shift
  started=$SECONDS
  printf '%s ... ' "$label"
  echo "== $label: $*" >> "$steps_log"
  if "$@" >> "$steps_log" 2>&1; then
    printf '%d s\n' $((SECONDS - started))
  else
    status=$?
    printf 'failed (exit %d)\n' "$status"
    return "$status"
  fi
}

step() {
  local status=0
  optional_step "$@" || status=$?
  if [ "$status" -ne 0 ]; then
    echo "the end of $steps_log:" >&2
    tail -n 25 "$steps_log" >&2
    exit "$status"
  fi
}

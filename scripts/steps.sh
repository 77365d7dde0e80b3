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
    if [ -n "${background_pid:-}" ]; then finish_background_step || true; fi  # nothing runs on after the set-up
    echo "the end of $steps_log:" >&2
    tail -n 25 "$steps_log" >&2
    exit "$status"
  fi
}

# `background_step LABEL COMMAND...` starts an optional step that the next steps do not wait for (npm's clients
# beside uv's packages: both mostly wait on the disk); `finish_background_step` waits for it and shows its one
# line with the seconds the step itself took, and returns its status. One background step at a time.
background_step() {
  background_label="$1"
  shift
  background_command="$*"
  background_log="$(mktemp "${TMPDIR:-/tmp}/medopenclaw-step.XXXXXX")"
  (
    started=$SECONDS
    status=0
    "$@" > "$background_log" 2>&1 || status=$?
    echo "$((SECONDS - started)) $status" > "$background_log.done"
  ) &
  background_pid=$!
}

finish_background_step() {
  local seconds=0 status=0
  wait "$background_pid" || status=$?
  { echo "== $background_label: $background_command"; cat "$background_log"; } >> "$steps_log"
  [ -s "$background_log.done" ] && read -r seconds status < "$background_log.done"
  rm -f "$background_log" "$background_log.done"
  background_pid=
  printf '%s ... ' "$background_label"
  if [ "$status" -eq 0 ]; then
    printf '%d s\n' "$seconds"
  else
    printf 'failed (exit %d)\n' "$status"
  fi
  return "$status"
}

# Sourced by the set-up scripts: `step LABEL COMMAND...` runs one set-up step and shows it as one line,
# "LABEL ... 12 s", instead of the installers' own output (pip's warnings, npm's), which goes to $steps_log; a
# step that fails shows the end of that log and stops the script.
steps_log="${steps_log:-${TMPDIR:-/tmp}/medopenclaw-setup.log}"

step() {
  local label="$1" started status
  shift
  started=$SECONDS
  printf '%s ... ' "$label"
  echo "== $label: $*" >> "$steps_log"
  if "$@" >> "$steps_log" 2>&1; then
    printf '%d s\n' $((SECONDS - started))
  else
    status=$?
    printf 'failed (exit %d); the end of %s:\n' "$status" "$steps_log"
    tail -n 25 "$steps_log" >&2
    exit "$status"
  fi
}

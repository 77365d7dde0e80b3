# Sourced by the set-up scripts: `uv_options PYTHON [CONFIGURED]` sets uv_args, the options under which uv installs
# into the environment of PYTHON as pip would there. uv reads none of pip's configuration: the same find-links,
# indexes, constraints and CA bundle (pip.conf and PIP_* variables, as `pip config list` of CONFIGURED shows them,
# PYTHON's own by default; a venv uv made has no pip to ask) become uv's options.
# unsafe-best-match: pick the best version across all indexes as pip does (uv's default takes every package from the
# first index that has it, and a local index that holds only some releases of a package would then hide the pinned
# one).
uv_options() {
  local python="$1" configured="${2:-$1}" key value item
  uv_args=(--python "$python" --index-strategy unsafe-best-match)
  while IFS='=' read -r key value; do
    value="${value#\'}"; value="${value%\'}"
    for item in $value; do
      case "$key" in
        *.find-links) uv_args+=(--find-links "$item") ;;
        *.extra-index-url) uv_args+=(--extra-index-url "$item") ;;
        *.index-url) uv_args+=(--index-url "$item") ;;
        *.constraint) uv_args+=(--constraint "$item") ;;
        *.cert) export SSL_CERT_FILE="$item" ;;
      esac
    done
  done < <("$configured" -m pip config list 2>/dev/null)
}

#!/usr/bin/env bash
# Install a headless Chromium from the Debian packages, for the report's browser check
# (Testing/Python/bench/report/test_report_browser.py). Idempotent; needs root (CI runs as root) or sudo.
set -euo pipefail
for binary in chromium-headless-shell chromium; do
  command -v "$binary" >/dev/null && exit 0
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium-headless-shell fonts-dejavu-core

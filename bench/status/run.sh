#!/usr/bin/env bash
# The cost of --status_port to the launcher (cost.py): 64 ranks, one scrape a second, on and off.
# Usage: bench/status/run.sh BUILD_DIR [cost.py's flags]
set -euo pipefail
build=${1:-build}
shift || true
exec /usr/bin/python3 "$(dirname "$0")/cost.py" "$build/launcher/acc-launch" "$@"

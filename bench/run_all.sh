#!/usr/bin/env bash
# make bench: every side-by-side benchmark that has been built. Not part of make test.
set -uo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
/usr/bin/python3 "$here/launch_overhead/bench.py" "$build/launcher/acc-launch"
for script in "$here"/*/run.sh; do
  [ -f "$script" ] && bash "$script" "$build"
done

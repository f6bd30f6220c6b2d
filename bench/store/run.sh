#!/usr/bin/env bash
# Builds and runs the store benchmark (not part of `make test`).
# Usage: bench/store/run.sh [BUILD_DIR] [store_bench flags, e.g. --seconds 3 --rounds 2]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
shift || true
if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target store_bench
exec "$build/bench/store/store_bench" "$@"

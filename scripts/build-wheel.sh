#!/usr/bin/env bash
# Packs an acc-launch binary into the wheel (python/acc_build_backend.py, the backend pyproject.toml
# names) and prints the wheel's path. Needs Python 3.11+ (tomllib), strip and objdump (binutils).
#   scripts/build-wheel.sh BINARY [DIR]   (DIR: default dist)
# `make wheel` passes the build tree's acc-launch; `pip wheel .` without a binary builds its own.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=$(realpath "$1")
dir=$(realpath -m "${2:-dist}")
python=${PYTHON:-/usr/bin/python3}
name=$(cd "$root" && ACC_LAUNCH_BINARY="$binary" "$python" -c '
import sys
sys.path.insert(0, "python")
import acc_build_backend
print(acc_build_backend.build_wheel(sys.argv[1]))' "$dir")
echo "$dir/$name"

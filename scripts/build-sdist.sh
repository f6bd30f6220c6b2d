#!/usr/bin/env bash
# Packs the source distribution, DIR/acc_launch-<version>.tar.gz (python/acc_build_backend.py's
# build_sdist: what building the acc-launch target needs, the Python package and the backend),
# and prints its path. Needs Python 3.11+ (tomllib reads pyproject.toml); builds nothing.
#   scripts/build-sdist.sh [DIR]   (DIR: default dist)
# `pip install DIR/acc_launch-<version>.tar.gz` then builds acc-launch from it (`make deps`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(realpath -m "${1:-dist}")
python=${PYTHON:-/usr/bin/python3}
name=$(cd "$root" && "$python" -c '
import sys
sys.path.insert(0, "python")
import acc_build_backend
print(acc_build_backend.build_sdist(sys.argv[1]))' "$dir")
echo "$dir/$name"

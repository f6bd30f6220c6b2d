#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs a C++17 program that includes
# every installed runtime header and links acc::runtime through find_package(acc-launch).
set -euo pipefail
build=$1
consumer=$2
prefix=$(mktemp -d /tmp/acc-install-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/acc/runtime/accelerator.h"
cmake -S "$consumer" -B "$prefix/consumer-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DACC_PREFIX="$prefix" >/dev/null
cmake --build "$prefix/consumer-build" -j2
env -u RANK -u WORLD_SIZE -u LOCAL_RANK "$prefix/consumer-build/consumer"

#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds a C++17 program that includes every
# installed runtime header and links acc::runtime_launch alone through find_package(acc-launch),
# and runs it: acc::launch_all starts two workers that train, and both ranks must end equal. Run
# again with --plain-backward (loss.backward() instead of acc.backward(loss)), it must fail with
# the acc::ConfigError that names acc.backward, caught through acc/runtime/runtime.h alone.
# Usage: install_test.sh BUILD CONSUMER [TORCH_PREFIX_PATH PROCESSES]: with a LibTorch's CMake
# prefix (a PyTorch wheel's torch.utils.cmake_prefix_path, as BUILD was configured with; see
# scripts/torch2-runtime-test.sh) the consumer is built against it too and runs PROCESSES workers.
set -euo pipefail
build=$1
consumer=$2
torch_prefix=${3:-}
processes=${4:-2}
prefix=$(mktemp -d /tmp/acc-install-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/acc/runtime/accelerator.h"
test -f "$prefix/include/acc/runtime/launch.h"
# The installed headers need LibTorch only: none names spdlog (whose fmt clashes with LibTorch's).
if grep -rl spdlog "$prefix/include/acc"; then
  echo "an installed header names spdlog" >&2
  exit 1
fi
# No build type (no optimisation): the test is that it builds and trains, not how fast.
# A wheel's torch/share/cmake: its own libc10.so, not a system LibTorch's found first (docs/runtime.md).
torch_flags=()
[ -n "$torch_prefix" ] && [ -f "$torch_prefix/../../lib/libc10.so" ] &&
  torch_flags=(-Dc10_LIBRARY="$(realpath "$torch_prefix/../../lib/libc10.so")")
cmake -S "$consumer" -B "$prefix/consumer-build" -G Ninja -DCMAKE_BUILD_TYPE= \
  -DCMAKE_PREFIX_PATH="$prefix${torch_prefix:+;$torch_prefix}" -DACC_PREFIX="$prefix" \
  "${torch_flags[@]}" >/dev/null
cmake --build "$prefix/consumer-build" -j2
# The consumer is the caller: none of a launcher's variables around it.
run_consumer() {
  env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u ACC_LAUNCH_WORKER "$prefix/consumer-build/consumer" "$@"
}
out=$(run_consumer --processes "$processes" 2>&1) || { echo "$out"; echo "consumer failed" >&2; exit 1; }
echo "$out"
grep -Eq "^consumer ok: $processes ranks? with equal parameters \(C\+\+17\)$" <<<"$out"
if out=$(run_consumer --processes "$processes" --plain-backward 2>&1); then
  echo "$out"
  echo "consumer --plain-backward succeeded" >&2
  exit 1
fi
echo "$out"
grep -q 'consumer: rank [01]: acc::ConfigError: optimizer step on gradients that acc.backward(loss) did not compute' <<<"$out"

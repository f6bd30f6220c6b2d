#!/usr/bin/env bash
# Runs the store benchmark (not part of `make test`) against both PyTorch generations, in one
# invocation: store_bench built against a PyTorch 2.x wheel's LibTorch (its clients against our
# server and 2.x's own, libuv, server: the ratios ours/2.x), then against Debian's LibTorch 1.13
# (its clients against our server and 1.13's server; a 2.x client cannot talk to 1.13's server,
# whose opcodes differ and which resets the connection at 2.x's handshake).
#
# Usage: bench/store/run.sh [BUILD_DIR] [store_bench flags, e.g. --seconds 3 --rounds 2]
#   BUILD_DIR (default build): the tree configured against Debian's LibTorch 1.13.
#   ACC_TORCH2_PYTHON (default /opt/acc-launch/peers-venv/bin/python): a Python whose torch is 2.x
#     (scripts/install-python-peers.sh installs that one); needed to configure
#   TORCH2_BUILD (default BUILD_DIR-torch2): the tree configured against its LibTorch; made here
#     when missing, as scripts/gpu-check.sh makes one.
# Every step is bounded: a store_bench that outlives its planned time is killed, with one line
# naming it, and the script exits 124.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
shift || true
torch2_build=${TORCH2_BUILD:-$build-torch2}
python2=${ACC_TORCH2_PYTHON:-/opt/acc-launch/peers-venv/bin/python}
say() { echo "bench/store/run.sh: $*" >&2; }

# The bound on one store_bench: every server, round and client count at its planned time, plus a
# margin for connecting, starting and stopping.
seconds=3 rounds=2 clients=8,32 yardsticks=1 classic=0
args=("$@")
for ((i = 0; i + 1 < ${#args[@]}; i += 2)); do
  case ${args[i]} in
    --seconds) seconds=${args[i + 1]} ;;
    --rounds) rounds=${args[i + 1]} ;;
    --clients) clients=${args[i + 1]} ;;
    --yardsticks | --minimal) yardsticks=${args[i + 1]} ;;
    --classic) classic=${args[i + 1]} ;;
  esac
done
servers=$((2 + (yardsticks != 0) * 5 + (classic != 0)))
counts=$(tr ',' '\n' <<<"$clients" | grep -c .)
bound=$(awk -v s="$seconds" -v n="$((servers * rounds * counts))" 'BEGIN { printf "%d", n * (s + 10) + 120 }')
bound=${STORE_BENCH_BOUND_S:-$bound}  # an override, to check the bound itself

# The 2.x tree: configured against the wheel's LibTorch, only store_bench built.
if [ ! -f "$torch2_build/build.ninja" ] && [ ! -f "$torch2_build/Makefile" ]; then
  if ! [ -x "$python2" ] ||
    ! "$python2" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null; then
    say "needs PyTorch 2.x for its clients and its libuv server: set ACC_TORCH2_PYTHON to a Python" \
      "whose torch is 2.x (scripts/install-python-peers.sh installs /opt/acc-launch/peers-venv)," \
      "or TORCH2_BUILD to a build tree configured against it; '$python2' has none"
    exit 2
  fi
  prefix=$("$python2" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
  say "configuring $torch2_build against $("$python2" -c 'import torch; print(torch.__version__)')"
  cmake -S . -B "$torch2_build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_PREFIX_PATH="$prefix" -DCUDAToolkit_ROOT=/usr/local/cuda \
    -DTORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}" \
    $(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) >/dev/null
fi
if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    $(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) >/dev/null
fi
for tree in "$torch2_build" "$build"; do
  if ! cmake --build "$tree" --target store_bench >/dev/null; then
    say "cannot build store_bench in $tree (is LibTorch found there? see its CMakeCache.txt)"
    exit 2
  fi
done

# run TREE: one store_bench, bounded; PyTorch's client warnings (a stack trace each) left out.
run() {
  local tree=$1 rc=0
  local start=$SECONDS
  timeout -k 5 "$bound" "$tree/bench/store/store_bench" "${args[@]}" \
    2> >(grep -v -E '^(\[W|frame #|Exception raised from|$)' >&2) || rc=$?
  # 124 is also the bench's own exit after its one line on a step that timed out.
  if [ "$rc" -eq 124 ] && [ $((SECONDS - start)) -ge "$bound" ]; then
    say "timed out: $tree/bench/store/store_bench did not finish in $bound s"
    exit 124
  fi
  [ "$rc" -eq 0 ] || exit "$rc"  # the bench said why in one line
}
echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg)"
run "$torch2_build"
# On a GPU machine the tree of its PyTorch 2.x is the only one (scripts/gpu-check.sh).
if [ "$(realpath "$build")" != "$(realpath "$torch2_build")" ]; then
  echo
  run "$build"
fi
echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg)"

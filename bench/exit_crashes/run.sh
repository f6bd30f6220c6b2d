#!/usr/bin/env bash
# How often a user's script crashes at exit: an unmodified DDP script and an Accelerate script
# (PyTorch 2.x, Gloo, 2 ranks, no os._exit), RUNS times each (default 50) under acc-launch and under
# the torchrun of the same PyTorch, in one run; prints both crash counts and the load average.
# PyTorch 2.11's race at exit shows under load: BUSY (default 0) busy loops run beside the jobs.
# Usage: bench/exit_crashes/run.sh [BUILD] [RUNS] [BUSY]. Not part of make test (it runs 10 of
# each, acc-launch only: PyTorch2ScriptsExitCleanly).
set -uo pipefail
build=${1:-build}
runs=${2:-50}
busy=${3:-0}
here=$(cd "$(dirname "$0")" && pwd)
python=$(bash "$here/../../scripts/install-python-peers.sh" --python)
busy_pids=()
trap 'kill "${busy_pids[@]}" 2>/dev/null' EXIT
for _ in $(seq "$busy"); do
  sh -c 'while :; do :; done' &
  busy_pids+=($!)
done
echo "== exit crashes: $runs runs of each script under acc-launch and torchrun, $busy busy loops beside ($("$python" -c 'import torch; print("torch", torch.__version__)'), load $(cut -d' ' -f1-3 /proc/loadavg))"
bash "$here/../../tests/integration/pytorch/clean_exit.sh" "$build/launcher/acc-launch" "$python" \
  "$runs" --vs-torchrun
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

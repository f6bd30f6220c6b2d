#!/usr/bin/env bash
# Users' scripts end as they are written: an unmodified DDP script (tests/wheel/ddp_until_stop.py)
# and an Accelerate script (tests/wheel/accelerate_until_stop.py), neither ending with os._exit,
# run RUNS times each under acc-launch (2 ranks, Gloo); every run must exit 0. PyTorch 2.11's
# Gloo teardown aborts at exit ("terminate called without an active exception") where its
# Flight Recorder is on, which acc-launch no longer turns on for Python workers on a CPU.
# With --vs-torchrun the same runs go under the torchrun of PYTHON too, and the counts are
# printed side by side without failing (bench/exit_crashes).
# Usage: clean_exit.sh ACC_LAUNCH PYTHON RUNS [--vs-torchrun]. Exits 77 (skipped) where PYTHON
# lacks torch or accelerate, or no network namespace can be made.
set -uo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$(realpath "$1")
python=$2
runs=$3
vs=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
scripts=$here/../../wheel
if [ -z "$python" ] || ! "$python" -c 'import torch.distributed, accelerate' 2>/dev/null; then
  echo "SKIP: $python cannot import torch.distributed and accelerate"; exit 77
fi
work=$(mktemp -d /tmp/acc-clean-exit-XXXXXX)
trap 'rm -rf "$work"' EXIT

# count LAUNCHER_NAME SCRIPT_NAME COMMAND...: runs COMMAND $runs times; prints the failures.
count() {
  local name=$1 script=$2 failed=0 aborted=0 i
  shift 2
  for i in $(seq "$runs"); do
    if ! "$@" >"$work/out" 2>"$work/err" || ! grep -q RESULT "$work/out"; then
      failed=$((failed + 1))
      grep -q 'terminate called' "$work/err" && aborted=$((aborted + 1))
      cp "$work/err" "$work/failed.$name.$script.$i"
    fi
  done
  echo "$name $script: $failed of $runs runs failed ($aborted aborted at exit)"
  eval "failed_${name//-/_}_$script=$failed"
}
for script in ddp accelerate; do
  file=$scripts/ddp_until_stop.py
  [ $script = accelerate ] && file=$scripts/accelerate_until_stop.py
  count acc-launch $script "$launcher" --nproc_per_node 2 --python "$python" "$file" "$work/stop" 5
  [ "$vs" = --vs-torchrun ] &&
    count torchrun $script "$python" -m torch.distributed.run --nproc_per_node 2 "$file" "$work/stop" 5
done
if [ "$vs" = --vs-torchrun ]; then
  echo "crashes: acc-launch $((failed_acc_launch_ddp + failed_acc_launch_accelerate))," \
       "torchrun $((failed_torchrun_ddp + failed_torchrun_accelerate)) (of $((2 * runs)) runs each)"
  exit 0
fi
if [ $((failed_acc_launch_ddp + failed_acc_launch_accelerate)) -ne 0 ]; then
  echo "FAIL: a run did not exit 0; the first failure's stderr:"
  tail -20 "$(ls "$work"/failed.* | head -1)"
  exit 1
fi
echo "PASS: $runs runs of each script exited 0"

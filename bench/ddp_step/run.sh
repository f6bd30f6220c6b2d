#!/usr/bin/env bash
# Our C++ DDP step (libacc under acc-launch) against PyTorch's Python DDP (under torchrun), both
# on Debian's LibTorch 1.13 with Gloo, BasicNet, global batch 64 over 2 processes. The two
# alternate for ROUNDS rounds in this one invocation so machine load hits both alike.
#   bench/ddp_step/run.sh BUILD_DIR      (STEPS=60 WARMUP=10 ROUNDS=2)
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
steps=${STEPS:-60}
warmup=${WARMUP:-10}
rounds=${ROUNDS:-2}
python=${PYTHON:-/usr/bin/python3}
args=(--steps "$steps" --warmup "$warmup" --batch 32)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for round in $(seq "$rounds"); do
  OMP_NUM_THREADS=1 "$build/launcher/acc-launch" --nproc_per_node 2 \
    "$build/bench/ddp_step/ddp_step" "${args[@]}" 2>/dev/null | grep '^ddp_step' | tee -a "$out"
  OMP_NUM_THREADS=1 "$python" ../shared/peers/torchrun_debian.py --nproc_per_node 2 \
    bench/ddp_step/ddp_step.py "${args[@]}" 2>/dev/null | grep '^ddp_step' | tee -a "$out"
done
awk '
  { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    n[v["impl"]]++; step[v["impl"]] += v["median_ms"]; wait[v["impl"]] += v["wait_ms"] }
  END {
    c = step["cpp"] / n["cpp"]; p = step["python"] / n["python"]
    printf "ddp_step: C++ libacc %.1f ms/step (waiting for gradients after backward %.1f ms, %.1f%%)\n", c, wait["cpp"] / n["cpp"], 100 * wait["cpp"] / n["cpp"] / c
    printf "ddp_step: Python DDP %.1f ms/step (waiting for gradients after backward %.1f ms, %.1f%%)\n", p, wait["python"] / n["python"], 100 * wait["python"] / n["python"] / p
    printf "ddp_step: ratio C++/Python %.3f (target <= 0.95)\n", c / p
  }' "$out"

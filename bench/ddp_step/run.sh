#!/usr/bin/env bash
# Our C++ DDP step (libacc under acc-launch) against PyTorch's Python DDP (under torchrun), both
# on Debian's LibTorch 1.13 with Gloo, BasicNet, global batch 64 over 2 processes. The two
# alternate for ROUNDS rounds in this one invocation so machine load hits both alike.
#   bench/ddp_step/run.sh BUILD_DIR      (STEPS=60 WARMUP=10 ROUNDS=3)
# On a GPU machine: DEVICE=cuda NPROC=<GPUs> BATCH=64 PYTHON=python3 (NCCL on both sides; the
# peer launcher is ../shared/peers/torchrun_debian.py where it exists, else torch's own).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
steps=${STEPS:-60}
warmup=${WARMUP:-10}
rounds=${ROUNDS:-3}
python=${PYTHON:-/usr/bin/python3}
device=${DEVICE:-cpu}
nproc=${NPROC:-2}
args=(--steps "$steps" --warmup "$warmup" --batch "${BATCH:-32}")
cpu_flag=()
[ "$device" = cpu ] && cpu_flag=(--cpu)
peer=(../shared/peers/torchrun_debian.py)
[ -f "${peer[0]}" ] || peer=(-m torch.distributed.run)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for round in $(seq "$rounds"); do
  OMP_NUM_THREADS=1 "$build/launcher/acc-launch" --nproc_per_node "$nproc" "${cpu_flag[@]}" \
    "$build/bench/ddp_step/ddp_step" "${args[@]}" 2>/dev/null | sed -n 's/^.*\(ddp_step impl=\)/\1/p' | tee -a "$out"
  OMP_NUM_THREADS=1 "$python" "${peer[@]}" --nproc_per_node "$nproc" \
    bench/ddp_step/ddp_step.py "${args[@]}" --device "$device" 2>/dev/null | sed -n 's/^.*\(ddp_step impl=\)/\1/p' | tee -a "$out"
done
# The median over rounds of each round's median: one round disturbed by the shared machine
# does not move it.
summary() {
  sed -n "s/^ddp_step impl=$1 .*median_ms=\([0-9.]*\) wait_ms=\([0-9.]*\)/\1 \2/p" "$out" |
    sort -n | awk '{ s[NR] = $1; w[NR] = $2 } END { m = int((NR + 1) / 2); print s[m], w[m] }'
}
read -r cpp cpp_wait <<<"$(summary cpp)"
read -r py py_wait <<<"$(summary python)"
awk -v c="$cpp" -v cw="$cpp_wait" -v p="$py" -v pw="$py_wait" -v r="$rounds" 'BEGIN {
  printf "ddp_step: C++ libacc %.1f ms/step, of which %.1f ms (%.1f%%) waiting for gradients after backward\n", c, cw, 100 * cw / c
  printf "ddp_step: Python DDP %.1f ms/step, of which %.1f ms (%.1f%%) waiting for gradients after backward\n", p, pw, 100 * pw / p
  printf "ddp_step: ratio C++/Python %.3f (target <= 0.95; median of %d alternating rounds)\n", c / p, r
}'

#!/usr/bin/env bash
# Our C++ DDP step (libacc under acc-launch) against PyTorch's Python DDP (under torchrun), both
# on Debian's LibTorch 1.13 with Gloo, BasicNet, global batch 64 over 2 processes; and PyTorch
# 2.x's Python DDP under its own torchrun (PYTHON2, default the environment of
# scripts/install-python-peers.sh; PYTHON2= leaves it out). They alternate for ROUNDS rounds in
# this one invocation so machine load hits all alike. Each run is bounded (RUN_TIMEOUT seconds).
#   bench/ddp_step/run.sh BUILD_DIR      (STEPS=60 WARMUP=10 ROUNDS=3 RUN_TIMEOUT=300)
# On a GPU machine: DEVICE=cuda NPROC=<GPUs> BATCH=64 PYTHON=python3 (NCCL on both sides). The
# peer launcher is torch's own torchrun through torchrun.py here, which mends Debian's on 3.11.
# Each side reports its median step and where it goes: forward, backward (until the last
# gradient), wait (for the all-reduce after backward), optimizer. Beside them, the floor: the
# same step in the same processes with no all-reduce (ddp_step --floor), what no DDP goes under.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
steps=${STEPS:-60}
warmup=${WARMUP:-10}
rounds=${ROUNDS:-3}
python=${PYTHON:-/usr/bin/python3}
python2=${PYTHON2-$(bash scripts/install-python-peers.sh --python)}
if [ -n "$python2" ] && ! "$python2" -c 'import torch.distributed' 2>/dev/null; then
  echo "ddp_step: no PyTorch 2.x at '$python2' (scripts/install-python-peers.sh): its row is left out"
  python2=
fi
run_timeout=${RUN_TIMEOUT:-300}
device=${DEVICE:-cpu}
nproc=${NPROC:-2}
args=(--steps "$steps" --warmup "$warmup" --batch "${BATCH:-32}")
cpu_flag=()
[ "$device" = cpu ] && cpu_flag=(--cpu)
peer=(bench/ddp_step/torchrun.py)
out=$(mktemp)
# torchrun makes a torchelastic_* directory in $TMPDIR at each run and never removes it: its runs
# get a TMPDIR of their own, removed at the end.
peer_tmp=$(mktemp -d -t ddp-step-XXXXXX)
trap 'rm -f "$out"; rm -rf "$peer_tmp"' EXIT
# bounded LABEL CMD...: runs CMD (at most run_timeout seconds), its result lines relabelled
# impl=LABEL into $out; a run that times out or fails is one line, and the bench goes on.
bounded() {
  local label=$1 rc
  shift
  set +e
  OMP_NUM_THREADS=1 timeout -k 5 "$run_timeout" "$@" 2>/dev/null |
    sed -n "s/^.*ddp_step impl=[a-z0-9]*/ddp_step impl=$label/p" | tee -a "$out"
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" -eq 124 ] && echo "ddp_step: $label timed out after ${run_timeout} s: $*"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && echo "ddp_step: $label failed (exit $rc): $*"
  return 0
}
for round in $(seq "$rounds"); do
  bounded floor "$build/launcher/acc-launch" --nproc_per_node "$nproc" "${cpu_flag[@]}" \
    "$build/bench/ddp_step/ddp_step" "${args[@]}" --floor
  bounded cpp "$build/launcher/acc-launch" --nproc_per_node "$nproc" "${cpu_flag[@]}" \
    "$build/bench/ddp_step/ddp_step" "${args[@]}"
  # libacc's all-reduce through Gloo, as across machines (on one machine's CPU it goes through
  # shared memory: runtime/src/shm_allreduce.h).
  [ "$device" = cpu ] && bounded cppgloo env ACC_SHM_ALLREDUCE=0 "$build/launcher/acc-launch" \
    --nproc_per_node "$nproc" "${cpu_flag[@]}" "$build/bench/ddp_step/ddp_step" "${args[@]}"
  bounded python env TMPDIR="$peer_tmp" "$python" "${peer[@]}" --nproc_per_node "$nproc" \
    bench/ddp_step/ddp_step.py "${args[@]}" --device "$device"
  if [ -n "$python2" ]; then
    bounded python2 env TMPDIR="$peer_tmp" "$python2" "${peer[@]}" --nproc_per_node "$nproc" \
      bench/ddp_step/ddp_step.py "${args[@]}" --device "$device"
  fi
done
# Per field, the median over rounds of each round's median (so the phases need not add up to the
# step exactly): one round disturbed by the shared machine does not move it.
fields=(median forward backward wait optimizer)
summary() {
  for field in "${fields[@]}"; do
    sed -n "s/^ddp_step impl=$1 .* $field""_ms=\([0-9.]*\).*/\1/p" "$out" | sort -n |
      awk '{ v[NR] = $1 } END { if (NR == 0) { print "nan"; exit } print v[int((NR + 1) / 2)] }'
  done | paste -sd' '
}
report() {
  awk -v who="$1" -v s="$2" -v f="$3" -v b="$4" -v w="$5" -v o="$6" 'BEGIN {
    if (s + 0 <= 0) { printf "ddp_step: %s: no result\n", who; exit 1 }
    printf "ddp_step: %-12s %6.1f ms/step: forward %.1f (%.0f%%), backward %.1f (%.0f%%), wait %.1f (%.0f%%), optimizer %.1f (%.0f%%)\n",
      who, s, f, 100 * f / s, b, 100 * b / s, w, 100 * w / s, o, 100 * o / s
  }'
}
read -r floor floor_fwd floor_bwd floor_wait floor_opt <<<"$(summary floor)"
read -r cpp cpp_fwd cpp_bwd cpp_wait cpp_opt <<<"$(summary cpp)"
read -r py py_fwd py_bwd py_wait py_opt <<<"$(summary python)"
report "floor" "$floor" "$floor_fwd" "$floor_bwd" "$floor_wait" "$floor_opt"
report "C++ libacc" "$cpp" "$cpp_fwd" "$cpp_bwd" "$cpp_wait" "$cpp_opt"
if [ "$device" = cpu ]; then
  read -r gloo gloo_fwd gloo_bwd gloo_wait gloo_opt <<<"$(summary cppgloo)"
  report "C++ on Gloo" "$gloo" "$gloo_fwd" "$gloo_bwd" "$gloo_wait" "$gloo_opt"
fi
report "Python DDP" "$py" "$py_fwd" "$py_bwd" "$py_wait" "$py_opt"
if [ -n "$python2" ]; then
  read -r py2 py2_fwd py2_bwd py2_wait py2_opt <<<"$(summary python2)"
  report "Python DDP 2" "$py2" "$py2_fwd" "$py2_bwd" "$py2_wait" "$py2_opt"
fi
awk -v c="$cpp" -v p="$py" -v p2="${py2:-}" -v g="${gloo:-}" -v f="$floor" -v r="$rounds" 'BEGIN {
  printf "ddp_step: ratio C++/Python %.3f (same LibTorch; target <= 0.95; median of %d alternating rounds)\n", c / p, r
  printf "ddp_step: floor/Python %.3f, C++/floor %.3f (the floor: the same step without the all-reduce)\n", f / p, c / f
  if (p2 + 0 > 0) printf "ddp_step: ratio C++/Python 2.x %.3f (Python DDP on PyTorch 2.x)\n", c / p2
  if (g + 0 > 0) printf "ddp_step: ratio C++ on Gloo/Python %.3f (libacc with ACC_SHM_ALLREDUCE=0)\n", g / p
}'

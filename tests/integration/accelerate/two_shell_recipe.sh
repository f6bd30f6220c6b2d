#!/usr/bin/env bash
# The two-shell recipe (docs/clusters.md): the same command in two shells meets in a c10d
# rendezvous at --main_process_ip:--main_process_port, without --machine_rank:
#   acc-launch --rdzv_backend c10d --main_process_ip 127.0.0.1 --main_process_port P \
#              --num_machines 2 --num_processes 4 ddp_check.py
# started twice in the background: one 4-rank PyTorch job passes its all_reduce check.
# Usage: two_shell_recipe.sh ACC_LAUNCH. Exits 77 (skipped) without
# python3-torch or a network namespace of its own (own_loopback.sh).
set -uo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
$python -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }

dir=$(mktemp -d /tmp/acc-two-shell-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT

port=29500  # in this script's own network namespace (own_loopback.sh)
mkdir -p "$dir/hf"
two_shells() {
  pids=()
  for shell in 1 2; do
    HF_HOME=$dir/hf PYTHON_EXEC=$python timeout 120 "$launcher" --rdzv_backend c10d \
      --main_process_ip 127.0.0.1 --main_process_port "$port" --num_machines 2 --num_processes 4 \
      "$here/../pytorch/ddp_check.py" >"$dir/out$shell" 2>"$dir/err$shell" &
    pids+=($!)
  done
  failed=0
  for i in 0 1; do
    wait "${pids[$i]}"; rc=$?
    [ $rc -eq 0 ] || { echo "FAIL: launcher $((i + 1)) exited $rc"; failed=1; }
  done
  return $failed
}
two_shells
pids=()
for shell in 1 2; do
  sed "s/^/shell$shell: /" "$dir/out$shell"
  [ $failed -eq 0 ] || sed "s/^/shell$shell stderr: /" "$dir/err$shell" | tail -20
done
[ $failed -eq 0 ] || exit 1
if ! cat "$dir/out1" "$dir/out2" | grep -q '^\[rank0\]: RESULT world=4 all_reduce=10 '; then
  echo "FAIL: no 4-rank all_reduce result"; exit 1
fi
echo "PASS: two launchers met and ran a 4-rank job"

#!/usr/bin/env bash
# Two launchers on loopback (node 0 and node 1, 2 ranks each) and rank 3, on node 1, asleep before
# an all_reduce: each launcher reports its own ranks, and node 0's report names the stuck
# collective across the nodes in its first line, from the traces node 1 put in the job's store
# (rank 3 never issued all_reduce #4; ranks 0-2 wait in it), with node 1's own summary below.
# Nothing is left running.
# Usage: hang_report_two_nodes.sh ACC_LAUNCH. Exits 77 (skipped) without
# python3-torch or a network namespace of its own (own_loopback.sh).
set -euo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$1
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
script=$here/hang_in_all_reduce.py
if ! $python -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: $python cannot import torch.distributed"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
token=hang-test-$$-$RANDOM
port=29500  # in this script's own network namespace (own_loopback.sh)
two_nodes() {
  local common=(--nnodes 2 --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port"
                --python $python --stall_timeout 3)
  "$launcher" "${common[@]}" --node_rank 1 "$script" 3 3 "$work/never-$token" > "$work/node1" 2>&1 &
  local node1=$!
  "$launcher" "${common[@]}" --node_rank 0 "$script" 3 3 "$work/never-$token" > "$work/node0" 2>&1
  status0=$?
  wait $node1
  status1=$?
  return $status0
}
set +e
two_nodes
set -e
grep -Ev ': (loading|step [0-9]+)$' "$work/node0"
echo "--- node 1 (exit $status1)"
grep -Ev ': (loading|step [0-9]+)$' "$work/node1"
[ "$status0" = 4 ] || fail "node 0 exited $status0, expected 4"
[ "$status1" != 0 ] || fail "node 1 exited 0"
first=$(grep -m1 '^acc-launch: hang' "$work/node0")
case "$first" in
  *"; stuck collective: rank 3 never issued all_reduce #4 (group default, 4 ranks); ranks 0-2 have waited in it for "*) ;;
  *) fail "node 0's first line does not name rank 3 and the all_reduce across nodes: $first";;
esac
grep -q '^  node 1: stuck collective: rank 3 never issued all_reduce #4' "$work/node0" ||
  fail "node 0's report lacks node 1's summary"
left=$(pgrep -f -- "$token" || true)
[ -z "$left" ] || fail "processes left running: $left"
echo "PASS: node 0's report names rank 3's missing all_reduce #4 across nodes; 0 processes left"

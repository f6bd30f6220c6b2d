#!/usr/bin/env bash
# Two launchers on loopback (node 0 and node 1, 2 ranks each) of one synchronous Gloo job whose
# node 1 is slow (ranks 2 and 3 compute 0.3 s per step, ranks 0 and 1 0.05 s): node 0, which
# judges the job from the windows every node puts in its store, names node 1 as a straggler while
# the job runs, once, and not its ranks one by one; node 1 says nothing of stragglers; node 0's
# end-of-attempt table shows every node's ranks; both nodes end 0 and nothing is left running.
# Usage: straggler_two_nodes.sh ACC_LAUNCH. Exits 77 (skipped) without
# python3-torch or a network namespace of its own (own_loopback.sh).
set -euo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$1
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
if ! $python -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: $python cannot import torch.distributed"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
token=straggler-test-$$-$RANDOM
port=29500  # in this script's own network namespace (own_loopback.sh)
two_nodes() {
  local common=(--nnodes 2 --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port"
                --python $python --straggler_window 3)
  "$launcher" "${common[@]}" --node_rank 1 "$here/straggler.py" 40 2,3 0.3 "$token" \
    > "$work/node1" 2>&1 &
  local node1=$!
  "$launcher" "${common[@]}" --node_rank 0 "$here/straggler.py" 40 2,3 0.3 "$token" \
    > "$work/node0" 2>&1
  status0=$?
  wait $node1
  status1=$?
  return $status0
}
set +e
two_nodes
set -e
grep -Ev ': step [0-9]+$' "$work/node0"
echo "--- node 1 (exit $status1)"
grep -Ev ': step [0-9]+$' "$work/node1"
[ "$status0" = 0 ] || fail "node 0 exited $status0, expected 0"
[ "$status1" = 0 ] || fail "node 1 exited $status1, expected 0"
named=$(grep -c '^acc-launch: node 1 ([^)]*) is a straggler: its ranks compute at least ' "$work/node0" || true)
[ "$named" = 1 ] || fail "node 0 named node 1 $named times, expected once"
line=$(grep -m1 '^acc-launch: node 1 ' "$work/node0")
case "$line" in
  *" s on the other nodes; the other nodes' ranks wait "*" s per step for it (window 3 s, "*) ;;
  *) fail "node 0's line lacks the others' wait: $line";;
esac
! grep -q 'rank [23] is a straggler\|ranks 2, 3 are stragglers' "$work/node0" ||
  fail "node 0 named node 1's ranks one by one"
! grep -q 'straggler' "$work/node1" || fail "node 1 spoke of stragglers: node 0 judges the job"
grep -q "^acc-launch: stragglers over the attempt (every node's ranks, from collective timing):" \
  "$work/node0" || fail "node 0 has no end-of-attempt table"
grep -qE '^  3     1     [0-9]+ +0\.[0-9]+ +0\.[0-9]+ +<- straggler$' "$work/node0" ||
  fail "node 0's table does not mark rank 3 of node 1"
left=$(pgrep -f -- "$token" || true)
[ -z "$left" ] || fail "processes left running: $left"
echo "PASS: node 0 named node 1 once as a straggler while the job ran; both nodes exit 0"

#!/usr/bin/env bash
# --max_no_progress_restarts on a static job of two nodes: both launchers in one fresh network
# namespace (its loopback and port 29500 are theirs alone), one worker each (test_worker). Node
# 1's worker fails before any progress at every attempt, node 0's waits to be stopped: node 1
# decides after 2 attempts, and both nodes exit 75 (--no_restart_exit_code), each with one line
# naming node 1 and the flag.
# Usage: no_progress_two_nodes.sh ACC_LAUNCH TEST_WORKER. Exits 77 (skipped) without the right to
# make a network namespace.
set -uo pipefail
launcher=$(realpath "$1")
worker=$(realpath "$2")
command -v unshare >/dev/null && unshare --net true 2>/dev/null ||
  { echo "SKIP: cannot make a network namespace"; exit 77; }
work=$(mktemp -d /tmp/acc-no-progress-XXXXXX)
trap 'rm -rf "$work"' EXIT

unshare --net bash -s "$launcher" "$worker" "$work" <<'INNER'
set -uo pipefail
launcher=$1 worker=$2 work=$3
ip link set lo up 2>/dev/null || { echo "SKIP: no ip to bring up loopback"; exit 77; }
for rank in 0 1; do
  timeout 60 "$launcher" --nnodes 2 --node_rank $rank --nproc_per_node 1 \
    --master_addr 127.0.0.1 --master_port 29500 --max_restarts 10 \
    --max_no_progress_restarts 2 --no_restart_exit_code 75 \
    --no_python "$worker" exit 1 1 >"$work/$rank.out" 2>"$work/$rank.err" &
  pids[$rank]=$!
done
status=0
for rank in 0 1; do
  wait ${pids[$rank]}
  rc=$?
  echo "node $rank exited $rc"
  if [ $rc -ne 75 ]; then echo "FAIL: node $rank exited $rc, not 75"; status=1; fi
  lines=$(grep -c -- '(--max_no_progress_restarts 2)' "$work/$rank.err")
  if [ "$lines" -ne 1 ]; then echo "FAIL: node $rank has $lines lines naming the flag"; status=1; fi
  grep -q 'node 1 (host .*) ended the job: no restart: 2 attempt(s) in a row failed before any progress' "$work/$rank.err" ||
    { echo "FAIL: node $rank does not name node 1"; status=1; }
  grep -q 'restarting (1 of 10' "$work/$rank.err" || { echo "FAIL: node $rank did not restart once"; status=1; }
  ! grep -q 'restarting (2 of 10' "$work/$rank.err" || { echo "FAIL: node $rank restarted twice"; status=1; }
  [ $status -eq 0 ] || { echo "--- node $rank"; cat "$work/$rank.err"; }
done
exit $status
INNER

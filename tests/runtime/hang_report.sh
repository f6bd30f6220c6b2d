#!/usr/bin/env bash
# --stall_timeout on silent C++ workers using libacc, whose only progress is the runtime's beat
# through the job's store: a job that prints nothing but trains is not reported; one whose rank 1
# sleeps before a step is, with rank 1 named and rank 0's native stack inside c10d/Gloo, exit 4,
# and nothing left running. Usage: hang_report.sh ACC_LAUNCH RUNTIME_WORKER
set -euo pipefail
launcher=$1
worker=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# Generous against a loaded machine: the stall clock starts with the workers, before LibTorch has
# loaded and the first step beats.
timeout=8
token=hang-test-$$-$RANDOM  # ignored by the worker; lets us count its processes

# 64 steps 250 ms apart: twice the stall timeout with no output at all, only beats.
set +e
"$launcher" --nproc_per_node 2 --stall_timeout $timeout "$worker" silent 64 250 -1 0 "$token" \
  > "$work/quiet.out" 2>&1
status=$?
set -e
cat "$work/quiet.out"
[ "$status" = 0 ] || fail "the silent, beating job exited $status"
! grep -q 'acc-launch: hang' "$work/quiet.out" || fail "a job that beats was reported as hung"

set +e
"$launcher" --nproc_per_node 2 --stall_timeout $timeout "$worker" silent 8 250 1 600 "$token" \
  > "$work/hang.out" 2>&1
status=$?
set -e
cat "$work/hang.out"
[ "$status" = 4 ] || fail "exit status $status, expected 4"
grep -m1 '^acc-launch: hang' "$work/hang.out" | grep -q 'odd one out: rank 1 (' ||
  fail "the report's first line does not name rank 1"
grep -q 'beats\|lines+beats' "$work/hang.out" || fail "no worker table"
sed -n '/^rank 0:/,/^rank 1:/p' "$work/hang.out" | grep -Eq 'c10d::|gloo::' ||
  sed -n '/^rank 0:/,/^rank 1:/p' "$work/hang.out" | grep -q 'wchan' ||
  fail "rank 0's stack is not inside c10d or Gloo"
left=$(pgrep -f -- "$token" || true)
[ -z "$left" ] || fail "processes left running: $left"
echo "PASS: the beating job ran silent to exit 0; the hung one named rank 1 and exited 4, 0 left"

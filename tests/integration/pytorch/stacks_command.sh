#!/usr/bin/env bash
# `acc-launch stacks PID` on a running PyTorch job: prints every rank's Python stack, and the job
# goes on to exit 0. Usage: stacks_command.sh ACC_LAUNCH. Exits 77 without python3-torch.
set -euo pipefail
launcher=$1
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
script=$here/hang_in_all_reduce.py
if ! $python -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: $python cannot import torch.distributed"; exit 77
fi
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Every rank waits, polling, for the file "release" after its steps.
"$launcher" --nproc_per_node 2 --python $python "$script" 2 -1 "$work/release" \
  > "$work/out" 2> "$work/err" &
pid=$!
for _ in $(seq 600); do  # hang guard: 60 s
  [ "$(grep -c ': step 1$' "$work/out")" = 2 ] && break
  kill -0 $pid 2>/dev/null || fail "the job ended early: $(cat "$work/err")"
  sleep 0.1
done
[ "$(grep -c ': step 1$' "$work/out")" = 2 ] || fail "the ranks did not reach step 1"

"$launcher" stacks $pid > "$work/stacks" || fail "acc-launch stacks exited $?"
cat "$work/stacks"
head -1 "$work/stacks" | grep -q '^acc-launch: hang report (on demand)' || fail "no report header"
wait_line=$(grep -n 'while stuck < 0' "$script" | cut -d: -f1)
grep -Eq "hang_in_all_reduce.py\", line ($wait_line|$((wait_line + 1))) in main$" "$work/stacks" ||
  fail "no frame at the release loop (line $wait_line)"
grep -q "python faulthandler" "$work/stacks" || fail "the stacks are not Python's"

touch "$work/release"
set +e
wait $pid
status=$?
set -e
pid=
[ "$status" = 0 ] || fail "the job exited $status after acc-launch stacks: $(cat "$work/err")"
[ "$(grep -c ': done$' "$work/out")" = 2 ] || fail "not every rank finished"
echo "PASS: stacks printed, the job went on and exited 0"

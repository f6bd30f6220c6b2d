#!/usr/bin/env bash
# A Python worker's traceback under acc-launch is the one it prints without it: no frame of the
# collective recorder (acc_launch/_hook.py, from the run directory), and, under PyTorch 2.x, which
# prefixes an uncaught exception's lines with [rankN]: itself, no second prefix. ACC_PYTHON_HOOK=0
# and --no_python_hook leave the hook out of the workers' environment altogether.
#   traceback_without_hook_frames.sh ACC_LAUNCH PYTHON   (PYTHON without torch: skipped, exit 77)
set -uo pipefail
launcher=$1
python=$2
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$python" ] || ! "$python" -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: $python has no torch.distributed"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
fail() { echo "FAIL: $1"; cat "$2"; status=1; }

"$launcher" --nproc_per_node 2 --python "$python" "$here/bad_collective.py" >"$out/on.log" 2>&1
rc=$?
[ $rc -ne 0 ] || fail "the failing rank's job exited 0" "$out/on.log"
grep -q 'in reduce_the_wrong_thing' "$out/on.log" ||
  fail "the traceback does not show the user's frame" "$out/on.log"
grep -q 'dist.all_reduce(\[1, 2, 3\])' "$out/on.log" ||
  fail "the traceback does not show the user's line" "$out/on.log"
if grep -q 'acc_launch/' "$out/on.log"; then fail "a frame of acc_launch/ shows" "$out/on.log"; fi
if grep -q '^\[rank1\]: \[rank1\]:' "$out/on.log"; then
  fail "a line carries the rank prefix twice" "$out/on.log"
fi
grep -q '^\[rank1\]: Traceback (most recent call last):' "$out/on.log" ||
  fail "the traceback's first line is not prefixed once" "$out/on.log"
# The hook was on: the recorder's file claimed by the worker (its frames were hidden, not absent).
"$launcher" --dry_run --python "$python" "$here/bad_collective.py" 2>/dev/null | grep -q '^ACC_STACK_DIR=' ||
  fail "the dry run shows no hook by default" /dev/null

for off in "env ACC_PYTHON_HOOK=0" "--no_python_hook"; do
  if [ "$off" = "--no_python_hook" ]; then
    run=("$launcher" --no_python_hook)
  else
    run=(env ACC_PYTHON_HOOK=0 "$launcher")
  fi
  "${run[@]}" --dry_run --python "$python" "$here/bad_collective.py" >"$out/off-dry.log" 2>&1
  if grep -Eq '^(ACC_STACK_DIR|ACC_STACK_SIGNAL|PYTHONFAULTHANDLER)=|/python(:|$)' "$out/off-dry.log"; then
    fail "$off: the dry run still shows the hook" "$out/off-dry.log"
  fi
  grep -q '(Python hook off)' "$out/off-dry.log" || fail "$off: the dry run does not say the hook is off" "$out/off-dry.log"
  "${run[@]}" --nproc_per_node 1 --python "$python" --no_python "$python" -c \
    'import os, sys; print("hook" if "acc_launch" in sys.modules or os.environ.get("ACC_STACK_DIR") else "no hook")' \
    >"$out/off.log" 2>&1
  grep -q '^\[rank0\]: no hook$' "$out/off.log" || fail "$off: the worker still has the hook" "$out/off.log"
done
[ $status -eq 0 ] && echo "PASS: user frames only, one prefix, hook off on request ($("$python" -c 'import torch; print(torch.__version__)'))"
exit $status

#!/usr/bin/env bash
# --stall_timeout on a real PyTorch (Gloo) job where one rank sleeps before an all_reduce: the
# report names that rank as the one that never issued the all_reduce the others wait in (from the
# collective traces) and shows the other ranks inside all_reduce at the script's line, the
# launcher exits 4 within the timeout + 5 s, and nothing is left running.
# Usage: hang_report.sh ACC_LAUNCH NPROC [PYTHON]. PYTHON: Debian's /usr/bin/python3 (PyTorch
# 1.13) by default, or one with PyTorch 2.x. Exits 77 (skipped) where PYTHON lacks torch.
set -euo pipefail
launcher=$1
nproc=$2
python=${3-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
script=$here/hang_in_all_reduce.py
if [ -z "$python" ] || ! "$python" -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: $python cannot import torch.distributed"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stuck=1
timeout=3
# A token on the workers' command line, so the processes of this run alone can be counted.
token=hang-test-$$-$RANDOM

# Each output line stamped with the time it arrived: the last one is the last progress.
set +e
"$launcher" --nproc_per_node "$nproc" --python "$python" --stall_timeout $timeout \
    --log_dir "$work/logs" "$script" 3 $stuck "$work/never-$token" 2>&1 |
  while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done > "$work/out"
status=${PIPESTATUS[0]}
set -e
end=$(date +%s.%N)
sed 's/^[0-9.]* //' "$work/out" | grep -v ': loading$' || true

fail() { echo "FAIL: $*"; exit 1; }
[ "$status" = 4 ] || fail "exit status $status, expected 4"
last_progress=$(grep -E '\]: (step [0-9]+|loading)$' "$work/out" | tail -1 | cut -d' ' -f1)
took=$(echo "$end - $last_progress" | bc)
echo "launcher exited $took s after the last worker line (stall timeout $timeout s)"
(( $(echo "$took <= $timeout + 5" | bc) )) || fail "took $took s"

header=$(grep -m1 '^[0-9.]* acc-launch: hang' "$work/out" | sed 's/^[0-9.]* //')
case "$header" in
  *"stuck collective: rank $stuck never issued all_reduce #4 (group default, $nproc ranks); "*) ;;
  *) fail "the report's first line does not name rank $stuck: $header";;
esac
step_line=$(grep -n 'dist.all_reduce(value)' "$script" | cut -d: -f1)
grep -q "in all_reduce$" "$work/out" || fail "no frame inside all_reduce"
grep -q "hang_in_all_reduce.py\", line $step_line in step$" "$work/out" ||
  fail "no frame at the script's all_reduce line $step_line"
others=$(seq 0 $((nproc - 1)) | grep -vx $stuck | paste -sd, | sed 's/,/, /g')
[ "$nproc" -gt 2 ] && { grep -q "^[0-9.]* ranks $others:$" "$work/out" ||
  fail "the waiting ranks $others are not folded into one stack"; }
ls "$work"/logs/*/hang_report.txt > /dev/null || fail "no hang_report.txt in the log dir"

left=$(pgrep -f -- "$token" || true)
[ -z "$left" ] || fail "processes left running: $left"
echo "PASS: rank $stuck named, others in all_reduce at line $step_line, exit 4 in $took s, 0 left"

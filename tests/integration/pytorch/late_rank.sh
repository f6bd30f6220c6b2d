#!/usr/bin/env bash
# A rank late to init_process_group is named while the others wait for it there, a short while
# into the attempt (the smaller of 30 s and half of --stall_init_timeout), instead of a silence
# until the start-up limit: a 2-rank PyTorch 2.x job whose rank 1 sleeps 16 s before
# init_process_group, with --stall_init_timeout 20 (the look at 10 s).
# Usage: late_rank.sh ACC_LAUNCH PYTHON. Exits 77 (skipped) where PYTHON lacks torch.
set -uo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$1
python=$2
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$python" ] || ! "$python" -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: $python cannot import torch.distributed"; exit 77
fi
err=$(mktemp)
trap 'rm -f "$err"' EXIT
out=$("$launcher" --nproc_per_node 2 --stall_init_timeout 20 --python "$python" \
        "$here/late_rank.py" 16 2>"$err")
rc=$?
line=$(grep 'not arrived in init_process_group' "$err")
echo "${line:-no start-up line}"
[ $rc -eq 0 ] || { echo "FAIL: exit $rc"; tail -20 "$err"; exit 1; }
case "$line" in
  *"attempt 0: after 10 s, rank 1 has not arrived"*"rank 0 waits there for it"*) ;;
  *) echo "FAIL: the late rank was not named"; tail -20 "$err"; exit 1 ;;
esac
grep -q 'RESULT world=2 sum=2' <<<"$out" || { echo "FAIL: no RESULT"; exit 1; }
echo "PASS: the late rank named 10 s in, the job ended 0"

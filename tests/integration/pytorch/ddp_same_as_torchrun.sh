#!/usr/bin/env bash
# An unmodified PyTorch DDP script gives the same result under acc-launch as under the torchrun of
# the same PyTorch.
# Usage: ddp_same_as_torchrun.sh ACC_LAUNCH [PYTHON]. PYTHON: Debian's /usr/bin/python3 (PyTorch
# 1.13, its torchrun patched in ../shared/peers) by default, or another with PyTorch 2.x (its own
# torchrun, `python -m torch.distributed.run`). Exits 77 (skipped) where PYTHON lacks torch or
# no network namespace can be made (own_loopback.sh).
set -euo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$1
python=${2-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
if [ "$python" = /usr/bin/python3 ]; then
  torchrun=("$here/../../../../shared/peers/torchrun_debian.py")
else
  torchrun=(-m torch.distributed.run)
fi
if [ -z "$python" ] || ! "$python" -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: $python cannot import torch.distributed"; exit 77
fi

ours=$("$launcher" --nproc_per_node 2 --python "$python" "$here/ddp_check.py" | sed -n 's/^\[rank0\]: RESULT/RESULT/p')
echo "acc-launch: $ours"
[ -n "$ours" ] || { echo "FAIL: no RESULT line from acc-launch"; exit 1; }
case "$ours" in *"world=2 all_reduce=3 "*) ;; *) echo "FAIL: unexpected result"; exit 1;; esac

if [ "${torchrun[0]}" != -m ] && [ ! -f "${torchrun[0]}" ]; then
  echo "torchrun peer not found at ${torchrun[0]} (../shared absent): compared with nothing"; exit 0
fi
port=29500  # in this script's own network namespace (own_loopback.sh)
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
# The peer's result is compared, not its exit: PyTorch 2.11's Gloo teardown aborts a rank under
# torchrun now and then (bench/exit_crashes), after the result is out.
theirs=$("$python" "${torchrun[@]}" --nproc_per_node 2 --master_port "$port" "$here/ddp_check.py" \
           2>"$errors" | grep '^RESULT') || echo "torchrun exited non-zero: $(grep -m1 -e terminate -e Error "$errors")"
echo "torchrun:   $theirs"
[ "$ours" = "$theirs" ] || { echo "FAIL: acc-launch and torchrun disagree"; exit 1; }
echo "PASS: same result"

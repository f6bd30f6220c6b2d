#!/usr/bin/env bash
# PyTorch >= 2.2 warns "Environment variable X is deprecated; use Y instead" on every rank when
# it finds an old name of one of its variables, and a Gloo group of PyTorch >= 2.8 reads the
# Flight Recorder's (its NCCL group reads the rest, which needs a GPU: scripts/gpu-check.sh).
# A 2-rank Gloo job under acc-launch with PyTorch 2.x must print no such line; with Debian's
# PyTorch 1.13 the workers still get the name 1.13 reads.
#   no_deprecated_names.sh ACC_LAUNCH PYTHON2   (PYTHON2 empty: skipped, exit 77)
set -uo pipefail
launcher=$1
python2=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$python2" ] || ! "$python2" -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: no PyTorch 2.x interpreter (ACC_TORCH2_PYTHON)"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0

"$launcher" --nproc_per_node 2 --python "$python2" "$here/allreduce_loop.py" 3 >"$out/v2.log" 2>&1
rc=$?
if [ $rc -ne 0 ] || ! grep -q "RESULT world=2 steps=3" "$out/v2.log"; then
  echo "FAIL: the 2-rank Gloo job under $python2 did not finish (exit $rc)"; cat "$out/v2.log"
  status=1
fi
if grep -i "deprecated" "$out/v2.log"; then
  echo "FAIL: PyTorch 2.x workers printed the lines above"
  status=1
fi
# The same job with both names given, as the launcher gave them before: the check above can fail.
NCCL_ASYNC_ERROR_HANDLING=1 TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_FR_BUFFER_SIZE=2000 \
  "$launcher" --nproc_per_node 2 --python "$python2" "$here/allreduce_loop.py" 3 \
  >"$out/both.log" 2>&1
if ! grep -q "TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated" "$out/both.log"; then
  echo "FAIL: with both names set, this PyTorch printed no warning: the check proves nothing"
  cat "$out/both.log"
  status=1
fi

if /usr/bin/python3 -c 'import torch, sys; sys.exit(not torch.__version__.startswith("1."))' \
    2>/dev/null; then
  env_of() { "$launcher" --dry_run --python /usr/bin/python3 "$here/allreduce_loop.py"; }
  if ! env_of | grep -qx "NCCL_ASYNC_ERROR_HANDLING=1"; then
    echo "FAIL: PyTorch 1.13 workers do not get NCCL_ASYNC_ERROR_HANDLING"; env_of; status=1
  fi
fi
[ $status -eq 0 ] && echo "PASS: no 'deprecated' line from 2-rank Gloo workers of $("$python2" -c 'import torch; print(torch.__version__)')"
exit $status

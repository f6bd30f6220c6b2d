#!/usr/bin/env bash
# A user's venv that reaches PyTorch 2.x through a .pth line (here: a bare `python3 -m venv` whose
# site-packages names PYTHON2's, the peers' venv from PyPI): the launcher reads that PyTorch's
# version without starting Python, the dry run names it and where it was read, and a real 2-rank
# Gloo job under the venv prints no "Environment variable X is deprecated" line (before, the
# launcher took the torch for unknown and gave both names of every renamed variable).
#   torch_through_pth.sh ACC_LAUNCH PYTHON2   (PYTHON2 without torch, or empty: skipped, exit 77)
set -uo pipefail
launcher=$1
python2=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$python2" ] || ! "$python2" -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: no PyTorch 2.x interpreter (ACC_TORCH2_PYTHON)"
  exit 77
fi
# The site-packages holding PYTHON2's torch, and the interpreter its venv was made from.
read -r torch_site version base < <("$python2" -c '
import os, sys, torch
print(os.path.dirname(os.path.dirname(torch.__file__)), torch.__version__, sys._base_executable)')
IFS=. read -r major minor _ <<<"$version"
if [ "$major" -lt 2 ] || { [ "$major" -eq 2 ] && [ "$minor" -lt 2 ]; }; then
  echo "SKIP: PyTorch $version of $python2 reads the old names (the check needs >= 2.2)"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! "$base" -m venv --without-pip "$out/venv" >/dev/null 2>&1; then
  echo "SKIP: $base cannot make a virtual environment"
  exit 77
fi
python=$out/venv/bin/python
site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$torch_site" >"$site/peers.pth"
status=0
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "FAIL: the venv does not import torch through $site/peers.pth: the test proves nothing"
  exit 1
fi

dry=$("$launcher" --dry_run --nproc_per_node 2 --python "$python" "$here/allreduce_loop.py" 3)
line="# torch: $version ($torch_site/torch/version.py)"
if ! grep -qxF "$line" <<<"$dry"; then
  echo "FAIL: the dry run does not say '$line'"; echo "$dry"
  status=1
fi
if grep -qx "NCCL_ASYNC_ERROR_HANDLING=1" <<<"$dry"; then
  echo "FAIL: PyTorch $version workers are given NCCL_ASYNC_ERROR_HANDLING"; echo "$dry"
  status=1
fi

"$launcher" --nproc_per_node 2 --python "$python" "$here/allreduce_loop.py" 3 >"$out/run.log" 2>&1
rc=$?
if [ $rc -ne 0 ] || ! grep -q "RESULT world=2 steps=3" "$out/run.log"; then
  echo "FAIL: the 2-rank Gloo job under $python did not finish (exit $rc)"; cat "$out/run.log"
  status=1
fi
if grep -i "deprecated" "$out/run.log"; then
  echo "FAIL: PyTorch $version workers reached through a .pth line printed the lines above"
  status=1
fi
# The control: the same torch reached through a .pth import line, code the launcher does not run.
# It cannot tell the version and gives both names: the dry-run checks above can fail. (On a node
# without GPUs the only doubled name left, NCCL's async error handling, is one a Gloo job of
# this PyTorch does not read, so its run need not warn; the Flight Recorder's, which it would
# read, are given where workers use GPUs only.)
echo "import sys; sys.path.append('$torch_site')" >"$site/peers.pth"
control=$("$launcher" --dry_run --python "$python" "$here/allreduce_loop.py" 3)
if ! grep -qxF "# torch: not found for $python: renamed variables are given under both names" \
    <<<"$control" || ! grep -qx "NCCL_ASYNC_ERROR_HANDLING=1" <<<"$control"; then
  echo "FAIL: the launcher saw through a .pth import line: the control proves nothing"
  status=1
fi
[ $status -eq 0 ] && echo "PASS: PyTorch $version through $site/peers.pth: named, and no 'deprecated' line"
exit $status

#!/usr/bin/env bash
# A single-node job's store listens on 127.0.0.1 alone, in each single-node form (the default,
# --standalone, c10d at localhost:0), and PyTorch's workers still reach it: the launcher's
# listening sockets (ss -ltnp, while its rank 0 waits) are all on 127.0.0.1, then ddp_check.py
# runs to its RESULT line.
# Usage: store_listens_on_loopback.sh ACC_LAUNCH PYTHON... Exits 77 (skipped) where no PYTHON can
# import torch.distributed or ss is missing.
set -uo pipefail
launcher=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
command -v ss >/dev/null || { echo "SKIP: no ss (iproute2)"; exit 77; }
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
ran=0
forms=("--nproc_per_node 2"
       "--standalone --nproc_per_node 2"
       "--rdzv-backend=c10d --rdzv-endpoint=localhost:0 --nnodes=1 --nproc_per_node 2")
for python in "$@"; do
  if [ -z "$python" ] || ! "$python" -c 'import torch.distributed' 2>/dev/null; then
    echo "skipped: $python cannot import torch.distributed"; continue
  fi
  for form in "${forms[@]}"; do
    ran=$((ran + 1))
    what="$python, $form"
    rm -f "$work"/ready "$work"/checked
    # shellcheck disable=SC2086 # the form is several flags
    ACC_LISTEN_CHECK_DIR=$work "$launcher" $form --python "$python" "$here/listen_check.py" \
      >"$work/out" 2>"$work/err" &
    pid=$!
    for _ in $(seq 1200); do [ -e "$work/ready" ] || ! kill -0 "$pid" 2>/dev/null && break; sleep 0.05; done
    listening=$(ss -ltnpH | grep "pid=$pid," | awk '{print $4}')
    touch "$work/checked"
    wait "$pid"
    code=$?
    pid=
    echo "$what: listening on: $(echo $listening)"
    if [ -z "$listening" ]; then
      echo "FAIL: $what: no listening socket of the launcher seen"; failures=$((failures + 1))
    elif echo "$listening" | grep -qv '^127\.0\.0\.1:'; then
      echo "FAIL: $what: listens beyond 127.0.0.1"; failures=$((failures + 1))
    fi
    if [ $code -ne 0 ] || ! grep -q 'RESULT world=2 all_reduce=3 ' "$work/out"; then
      echo "FAIL: $what: exit $code, no RESULT line"; tail -5 "$work/err"; failures=$((failures + 1))
    fi
  done
done
[ $ran -gt 0 ] || { echo "SKIP: no Python with torch.distributed"; exit 77; }
[ $failures -eq 0 ] && echo "PASS: $ran jobs listened on 127.0.0.1 alone and ran"
exit $((failures > 0))

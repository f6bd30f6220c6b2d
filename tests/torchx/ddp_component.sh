#!/usr/bin/env bash
# acc_launch.torchx.ddp (python/acc_launch/torchx.py) under TorchX's own CLI and local scheduler,
# as docs/clusters.md ("TorchX") writes it:
#   1. the component against dist.ddp without a job (test_component.py: same parameters, same
#      AppDef but acc-launch in torchrun's place, accepted by TorchX's linter);
#   2. `torchx run -s local_cwd python/acc_launch/torchx.py:ddp -j 1x2 --script allreduce.py`
#      succeeds; the replica's log shows both ranks' all_reduce (3 = 1 + 2), each printed by a
#      worker whose parent process is acc-launch and that has acc-launch's ACC_PROGRESS_FILE
#      (the peers' torchrun is on PATH too: the component calling it would fail here);
#   3. the same with -j 2x1: two replicas (nodes) of one worker, each an acc-launch, meeting in
#      dist.ddp's c10d rendezvous at ${TORCHX_RANK0_HOST:=localhost}:RDZV_PORT;
#   4. -j 1x2 with rank 1 raising under @record (--env, a parameter passed through): torchx run
#      exits 1 and reports the app FAILED with rank 1's error as its structured_error_msg.
# Usage: ddp_component.sh ACC_LAUNCH PYTHON  (PYTHON: one with torch and torchx, the peers'
# venv; exits 77, ctest's skip, where it is empty or lacks either).
set -euo pipefail
launcher=$(realpath "$1")
python=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "$python" ] || ! "$python" -c 'import torch, torchx' 2>/dev/null; then
  echo "SKIP: no Python with torch and torchx (${python:-ACC_TORCH2_PYTHON is empty})"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/acc-torchx-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1.
PYTHONPATH="$root/python" "$python" -m unittest discover -s "$here" -p test_component.py ||
  fail "the component's unit tests"

# acc-launch on PATH first (the build's, as the wheel's would be), then the venv's python3 (which
# acc-launch runs the script with) and torchx.
export PATH="$(dirname "$launcher"):$(dirname "$python"):$PATH"
# No standby Pythons importing torch for a next attempt none of these jobs has: half the CPU.
export ACC_WARM_WORKERS=0
cp "$here/allreduce.py" "$work/"
run() {  # run NAME COMPONENT_ARGS...: torchx run ... --script allreduce.py in $work, to NAME.out
  local name=$1
  shift
  (cd "$work" && timeout 120 "$python" -m torchx.cli.main run -s local_cwd \
    -cfg "log_dir=$work/$name" "$root/python/acc_launch/torchx.py:ddp" "$@" \
    --script allreduce.py) >"$work/$name.out" 2>&1
}

ranks_ran() {  # ranks_ran NAME WHAT: job NAME succeeded and its replicas' logs show both ranks
  local name=$1 what=$2 logs
  grep -q 'Job finished: SUCCEEDED' "$work/$name.out" || fail "$what: $(cat "$work/$name.out")"
  logs=$(find "$work/$name/torchx" -name combined.log -path '*/allreduce/*' -exec cat {} +)
  [ -n "$logs" ] || fail "$what: no replica log under $work/$name: $(cat "$work/$name.out")"
  for rank in 0 1; do
    grep -q "rank $rank of 2: all_reduce 3, launcher acc-launch\$" <<<"$logs" ||
      fail "$what: no 'rank $rank of 2: all_reduce 3, launcher acc-launch' in the replicas' logs:" \
        "$logs"
  done
  echo "PASS: $what: ranks 0 and 1 all_reduced 3 under acc-launch"
}
# 2.
run ok -j 1x2 || fail "torchx run -j 1x2 exited $?: $(cat "$work/ok.out")"
ranks_ran ok "-j 1x2 (one replica of 2 workers)"

# 3. Two replicas of one worker (two nodes, on this machine): the c10d rendezvous at
# ${TORCHX_RANK0_HOST:=localhost}:RDZV_PORT, whose port is free now.
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
run nodes -j 2x1 --rdzv_port "$port" ||
  fail "torchx run -j 2x1 exited $?: $(cat "$work/nodes.out")"
ranks_ran nodes "-j 2x1 (two replicas of 1 worker, c10d at localhost:$port)"

# 4.
status=0
run failed -j 1x2 --env EXIT_RANK=1 || status=$?
[ "$status" -eq 1 ] ||
  fail "torchx run of a job whose rank 1 exits 3 exited $status: $(cat "$work/failed.out")"
grep -q 'Job finished: FAILED' "$work/failed.out" || fail "not FAILED: $(cat "$work/failed.out")"
# The worker's @record error, passed on to the replica's own TORCHELASTIC_ERROR_FILE as torchrun
# does, is the app's structured error.
grep -A12 'structured_error_msg:' "$work/failed.out" |
  grep -q "message: 'ValueError: rank 1 gives up on purpose'" ||
  fail "the app's structured_error_msg lacks rank 1's error: $(cat "$work/failed.out")"
echo "PASS: a rank that raises fails the TorchX app (torchx run exited 1), its error the app's"

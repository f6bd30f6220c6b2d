#!/usr/bin/env bash
# Checkpoints in the launcher's memory as a user meets them (docs/checkpoints.md): checkpoints.py,
# a DDP script that saves every step with acc_launch.checkpoint, 2 ranks, --max_restarts 1, rank
# 1 SIGKILLed after step 3 of 6 was saved by both.
#   kill:       attempt 1 loads step 3's values (each rank's weights as it printed them), the job
#               ends 0; once acc-launch has exited, PATH loads with plain
#               torch.distributed.checkpoint.load in a process without acc_launch: step 6's
#               values; no memory directory is left.
#   no_room:    the memory (a 2 MB tmpfs, as TMPDIR, in a mount namespace of its own) cannot hold
#               a save: one line says so and how to give a container more, the saves go to storage
#               as dcp.save's, and the job still ends 0 with step 6 in PATH.
#   unwritable: PATH cannot be made (its parent is a file): one line names it, training goes on
#               with the copies in memory, the job ends 0.
# Usage: checkpoints.sh ACC_LAUNCH PYTHON [CASES]. Exits 77 (skipped) where PYTHON has no
# torch.distributed.checkpoint with checkpoint_id (PyTorch < 2.2).
set -uo pipefail
launcher=$(realpath "$1")
python=$2
cases=${3:-kill no_room unwritable}
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$python" ] || ! "$python" -c '
import inspect, torch.distributed.checkpoint as dcp
assert "checkpoint_id" in inspect.signature(dcp.save).parameters' 2>/dev/null; then
  echo "SKIP: $python has no torch.distributed.checkpoint with checkpoint_id"; exit 77
fi
source "$here/../own_loopback.sh"
work=$(mktemp -d /tmp/acc-checkpoints-XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "$here/checkpoints.py" "$work/"
fail() { echo "FAIL: $1"; [ -n "${2:-}" ] && tail -25 "$2"; exit 1; }

# job NAME PATH [WIDTH] [PREFIX...]: the job, its output in $work/NAME.{out,err}; exits on failure.
job() {
  local name=$1 path=$2 width=${3:-64}
  shift 3
  (cd "$work" && timeout 240 "$@" "$launcher" --nproc_per_node 2 --max_restarts 1 \
    --python "$python" checkpoints.py "$path" 6 3 "$width" >"$work/$name.out" 2>"$work/$name.err")
  local rc=$?
  [ $rc -eq 0 ] || fail "$name: the job exited $rc" "$work/$name.err"
}

# plain_load PATH WIDTH: what plain dcp.load reads from PATH, in a process without acc_launch.
plain_load() {
  env -u PYTHONPATH "$python" - "$1" "$2" <<'PY'
import json, sys
import torch
import torch.distributed.checkpoint as dcp
assert "acc_launch" not in sys.modules
path, width = sys.argv[1], int(sys.argv[2])
model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Linear(width, width))
state = {"app": {"model": model.state_dict(), "step": 0}}  # get_state_dict drops "module."
dcp.load(state, checkpoint_id=path)
weights = sum(v.double().sum().item() for v in state["app"]["model"].values())
print(json.dumps({"step": state["app"]["step"], "weights": weights,
                  "acc_launch": "acc_launch" in sys.modules}))
PY
}

# check NAME PATH WIDTH LOADS: the lines of the job against each other and against plain_load.
check() {
  local name=$1 path=$2 width=$3 loads=$4
  plain_load "$path" "$width" >"$work/$name.plain" 2>"$work/$name.plain.err" ||
    fail "$name: plain dcp.load could not read $path" "$work/$name.plain.err"
  "$python" - "$work/$name.out" "$work/$name.plain" "$loads" <<'PY' || exit 1
import json, sys
out, plain, loads = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3] == "loads"
lines = [l.split("]: ", 1)[-1] for l in open(out)]
steps = [json.loads(l[5:]) for l in lines if l.startswith("STEP ")]
loaded = [json.loads(l[7:]) for l in lines if l.startswith("LOADED ")]
problems = []
for rank in (0, 1):
    at3 = [s for s in steps if s["attempt"] == 0 and s["rank"] == rank and s["step"] == 3]
    mine = [l for l in loaded if l["attempt"] == 1 and l["rank"] == rank]
    if loads and (not at3 or not mine or mine[0]["step"] != 3 or mine[0]["weights"] != at3[0]["weights"]):
        problems.append("rank %d: attempt 1 loaded %s, attempt 0 saved at step 3 %s" % (rank, mine, at3))
last = [s for s in steps if s["attempt"] == 1 and s["rank"] == 0 and s["step"] == 6]
if not last:
    problems.append("attempt 1 did not reach step 6")
elif plain["step"] != 6 or abs(plain["weights"] - last[0]["weights"]) > 1e-9 * max(1, abs(plain["weights"])):
    problems.append("plain dcp.load read %s, the job ended at %s" % (plain, last[0]))
if plain["acc_launch"]:
    problems.append("the plain load imported acc_launch")
for p in problems:
    print("FAIL: " + p)
print("loaded: %s; plain dcp.load after the job: %s" % (loaded, plain))
sys.exit(1 if problems else 0)
PY
}

for name in $cases; do
  case $name in
    kill)
      job kill "$work/ckpt" 64
      check kill "$work/ckpt" 64 loads
      memory=$(grep -ao 'ACC_CHECKPOINT_MEMORY=[^ ]*' "$work/kill.out" | head -1 | cut -d= -f2)
      [ -n "$memory" ] || fail "kill: no worker said its ACC_CHECKPOINT_MEMORY" "$work/kill.out"
      [ ! -e "$memory" ] || fail "kill: the memory $memory is left after the job"
      # The job-long helper that wrote the saves (acc_launch.checkpoint serve) went with the job.
      sleep 1
      ! pgrep -f "serve $memory" >/dev/null || fail "kill: the checkpoint helper outlived the job"
      grep -q "checkpoint:" "$work/kill.err" && fail "kill: a checkpoint line" "$work/kill.err"
      echo "PASS: kill" ;;
    no_room)
      if [ "$(id -u)" -ne 0 ] || ! unshare -m true 2>/dev/null; then
        echo "SKIP: no_room (needs root and a mount namespace)"; continue
      fi
      mkdir -p "$work/small"
      # Two layers of 1024 x 1024: 8 MB of weights, 24 MB with Adam's state; the tmpfs has 2.
      job no_room "$work/ckpt-no-room" 1024 unshare -m sh -c \
        "mount -t tmpfs -o size=2m tmpfs '$work/small' && TMPDIR='$work/small' exec \"\$@\"" sh
      [ "$(grep -c 'no room for' "$work/no_room.err")" -eq 1 ] ||
        fail "no_room: not one line saying the memory has no room" "$work/no_room.err"
      grep 'no room for' "$work/no_room.err"
      check no_room "$work/ckpt-no-room" 1024 loads
      echo "PASS: no_room" ;;
    unwritable)
      touch "$work/a-file"
      job unwritable "$work/a-file/ckpt" 64
      [ "$(grep -c 'checkpoint: cannot write' "$work/unwritable.err")" -eq 1 ] ||
        fail "unwritable: not one line saying PATH cannot be written" "$work/unwritable.err"
      grep 'checkpoint: cannot write' "$work/unwritable.err"
      echo "PASS: unwritable" ;;
  esac
done

#!/usr/bin/env bash
# --checkpoint_replica as a user meets it (docs/checkpoints.md, "A replica on another node"): two
# launchers, each a node of one PyTorch DDP rank, --nnodes 1:2 through etcd (a store that outlives
# every node), checkpoints.py saving every step with acc_launch.checkpoint to one PATH, and
# ACC_CHECKPOINT_WRITE_INTERVAL=0 (PATH is written at the first save, at a failure and at the
# end); the launchers share a job secret. 30 steps after the first write to PATH, the node of
# rank 0 is SIGKILLed with its launcher, so nobody writes its newest save to PATH:
#   replica: the other node goes on alone; its restarted rank 0 loads, from the replica the
#            dead node sent it, a step no more than 3 behind the last one printed before the
#            kill; the job ends 0, and PATH then loads with plain torch.distributed.checkpoint
#            in a process without acc_launch: the last step;
#   none:    the same without the flag: rank 0 loads PATH's older step (the test can fail);
#   proof:   the replica's receiver (acc-launch __checkpoint_replica receive) with a job secret,
#            driven over its socket: a sender with a wrong proof of the secret is cut off and
#            leaves nothing; one with the right proof (HMAC-SHA256 of the receiver's nonce) has
#            its save committed, the one before it replaced.
# Nothing may be left running. Usage: checkpoint_replica.sh ACC_LAUNCH PYTHON [CASES]. Exits 77
# (skipped) without etcd, a network namespace of its own, or a PYTHON whose
# torch.distributed.checkpoint takes checkpoint_id (PyTorch >= 2.2).
set -uo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$(realpath "$1")
python=$2
cases=${3:-proof replica none}
here=$(cd "$(dirname "$0")" && pwd)
command -v etcd >/dev/null || { echo "SKIP: no etcd (Debian's etcd-server)"; exit 77; }
if [ -z "$python" ] || ! "$python" -c '
import inspect, torch.distributed.checkpoint as dcp
assert "checkpoint_id" in inspect.signature(dcp.save).parameters' 2>/dev/null; then
  echo "SKIP: $python has no torch.distributed.checkpoint with checkpoint_id"; exit 77
fi

work=$(mktemp -d /tmp/acc-replica-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  wait 2>/dev/null
  [ -n "${ACC_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $1"; tail -n 25 "$work"/*.err; exit 1; }
cp "$here/../pytorch/checkpoints.py" "$work/"
etcd --name m0 --data-dir "$work/m0.etcd" --listen-client-urls http://127.0.0.1:2379 \
  --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
  >"$work/etcd.log" 2>&1 &
pids+=($!)
steps=200
printf 'the job secret' >"$work/job-secret" && chmod 600 "$work/job-secret"

# node CASE NAME [FLAG]: one launcher (exec: run it with &, and $! is its pid), output in
# $work/CASE.NAME.{out,err}
node() {
  cd "$work" && exec env ACC_CHECKPOINT_WRITE_INTERVAL=0 STEP_SECONDS=0.1 \
    ACC_JOB_SECRET_FILE="$work/job-secret" "$launcher" \
    --nnodes 1:2 --nproc_per_node 1 --rdzv_backend etcd-v2 --rdzv_endpoint 127.0.0.1:2379 \
    --rdzv_id "$1$$" --max_restarts 3 --shutdown_timeout 5 \
    --rdzv_conf last_call_timeout=1,keep_alive_interval=1,join_timeout=60 ${3:-} \
    --python "$python" checkpoints.py "$work/$1.ckpt" $steps 0 64 \
    >"$work/$1.$2.out" 2>"$work/$1.$2.err"
}
# The last step rank 0 printed in attempt 0, in FILES.
last_step() { grep -h '"attempt": 0, "rank": 0' "$@" | grep -o '"step": [0-9]*' | tail -n 1 | grep -o '[0-9]*'; }

run_case() {  # run_case CASE FLAG: prints the step rank 0 loaded after the kill, and the kill's
  local name=$1 flag=$2
  node "$name" a "$flag" & local a=$!
  node "$name" b "$flag" & local b=$!
  pids+=($a $b)
  # The kill comes 30 steps after the first write to PATH is done (its save's number in
  # PATH/acc-seq), so that PATH is older than the kill however long the helper's import took.
  local kill_at=
  for _ in $(seq 900); do
    [ -z "$kill_at" ] && [ -s "$work/$name.ckpt/acc-seq" ] &&
      kill_at=$(($(cat "$work/$name.ckpt/acc-seq") + 30))
    [ -n "$kill_at" ] && [ "$(last_step "$work/$name".{a,b}.out)" -ge $kill_at ] 2>/dev/null && break
    sleep 0.1
  done
  [ -n "$kill_at" ] || fail "$name: the first write to PATH never came"
  local dead=$a survivor=b
  grep -q '"rank": 0' "$work/$name.b.out" && { dead=$b; survivor=a; }
  local killed_at
  killed_at=$(last_step "$work/$name".{a,b}.out)
  kill -9 "$dead"
  [ "$survivor" = a ] && wait $a || wait $b
  local rc=$?
  [ $rc = 0 ] || fail "$name: the surviving node exited $rc"
  local loaded
  loaded=$(grep -h 'LOADED' "$work/$name.$survivor.out" | grep -o '"step": [0-9]*' | head -n 1 |
    grep -o '[0-9]*')
  echo "$name: killed the node of rank 0 at step $killed_at; the survivor's rank 0 loaded step ${loaded:-none}"
  [ -n "$loaded" ] || fail "$name: the restarted rank 0 loaded nothing"
  echo "$killed_at $loaded" >"$work/$name.steps"
}

for c in $cases; do
  case $c in
    replica)
      run_case replica --checkpoint_replica
      read -r killed_at loaded <"$work/replica.steps"
      [ "$loaded" -ge $((killed_at - 3)) ] ||
        fail "replica: rank 0 loaded step $loaded, not the replica's (the kill was at $killed_at)"
      grep -h 'from this node.s replica' "$work"/replica.*.err || fail "replica: no line says the replica was used"
      step=$(ACC_PYTHON_HOOK=0 "$python" -c '
import sys, torch, torch.distributed.checkpoint as dcp
state = {"app": {"step": 0}}
dcp.load(state, checkpoint_id=sys.argv[1])
assert "acc_launch" not in sys.modules
print(state["app"]["step"])' "$work/replica.ckpt") || fail "replica: plain dcp.load of PATH failed"
      [ "$step" = $steps ] || fail "replica: PATH holds step $step, not $steps"
      echo "PASS: replica: rank 0 loaded step $loaded of the node lost at $killed_at; PATH loads step $step with plain DCP"
      ;;
    proof)
      mkdir -m 700 "$work/memory"
      printf 's3cret' >"$work/memory/replica.secret"
      "$launcher" __checkpoint_replica receive "$work/memory" 127.0.0.1 $$ >"$work/proof.err" 2>&1 &
      receiver=$!
      pids+=($receiver)
      for _ in $(seq 100); do [ -s "$work/memory/replica.address" ] && break; sleep 0.05; done
      "$python" - "$work/memory" <<'PY' || fail "proof: the receiver did not do as its protocol says"
import hashlib, hmac, os, socket, sys
memory = sys.argv[1]
host, port = open(os.path.join(memory, "replica.address")).read().rsplit(":", 1)

def link(secret, seq, data):
    s = socket.create_connection((host, int(port)), timeout=10)
    f = s.makefile("rb")
    nonce = f.readline().decode().split()[1]
    proof = hmac.new(secret, nonce.encode(), hashlib.sha256).hexdigest()
    meta = b"acc-slot 1 %d\nPICKLE" % len(data)
    try:
        s.sendall(b"proof %s\n" % proof.encode())
        s.sendall(b"save 0 %d 1 %d %d\n" % (seq, len(data), len(meta)) + data + meta + b"commit\nend\n")
        return f.readline()
    except OSError:
        return b""

replica = os.path.join(memory, "replica")
assert link(b"wrong", 3, b"evil") == b"", "a wrong proof was answered"
assert sorted(os.listdir(replica)) in ([], ["lock"]), os.listdir(replica)
for seq in (5, 7):
    assert link(b"s3cret", seq, b"save%d" % seq) == b"ok\n", "the right proof was refused"
assert sorted(os.listdir(replica)) == ["lock", "rank0.7.meta", "rank0.data"], os.listdir(replica)
assert open(os.path.join(replica, "rank0.data"), "rb").read() == b"save7"
print("PASS: proof: a wrong proof of the secret is cut off and leaves nothing; the right one's save replaces the last")
PY
      kill $receiver && wait $receiver 2>/dev/null
      ;;
    none)
      run_case none ""
      read -r killed_at loaded <"$work/none.steps"
      [ "$loaded" -lt $((killed_at - 3)) ] ||
        fail "none: rank 0 loaded step $loaded without a replica (the kill was at $killed_at): the case cannot tell"
      echo "PASS: none: without --checkpoint_replica rank 0 loaded PATH's step $loaded (the kill was at $killed_at)"
      ;;
  esac
done
sleep 1
# Launchers and workers name $work; the replica's helpers, their subcommand (etcd is the test's).
left=$(pgrep -f "$work/[^m]|__checkpoint_replica" | wc -l)
[ "$left" = 0 ] || { pgrep -af "$work/[^m]|__checkpoint_replica"; fail "$left processes left running"; }
echo "PASS: nothing left running"

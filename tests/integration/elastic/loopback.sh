#!/usr/bin/env bash
# Elastic rendezvous between launchers on loopback, each a "node" with 2 PyTorch Gloo workers:
#   1. two nodes (--nnodes 1:2) meet in one round and run a 4-rank job;
#   2. a node with another --rdzv_id never joins that job: it stops alone, with one line;
#   3. an endpoint where nothing listens is one clear line and a non-zero exit, quickly;
#   4. a port another program holds when the nodes start, and then lets go, is taken over by a
#      node that may host the store: the job runs.
# Usage: loopback.sh ACC_LAUNCH. Exits 77 (skipped) without python3-torch or a
# network namespace of its own (own_loopback.sh).
set -uo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
export PYTHON_EXEC=/usr/bin/python3 HF_HOME=/nonexistent/acc-launch-tests
$PYTHON_EXEC -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }
work=$(mktemp -d /tmp/acc-elastic-XXXXXX)
trap 'rm -rf "$work"' EXIT
port=29400  # in this script's own network namespace (own_loopback.sh)

node() {  # node NAME RDZV_ID NNODES: one launcher, output in $work/NAME.{out,err,rc}
  "$launcher" --nnodes "$3" --nproc_per_node 2 --rdzv_backend c10d \
    --rdzv_endpoint 127.0.0.1:$port --rdzv_id "$2" \
    --rdzv_conf last_call_timeout=1,join_timeout=${JOIN_TIMEOUT:-60},keep_alive_interval=1${CONF:-} \
    "$here/../pytorch/ddp_check.py" >"$work/$1.out" 2>"$work/$1.err"
  echo $? >"$work/$1.rc"
}

# 1 and 2 together: a and b are job "one"; c is job "two", which needs 2 nodes and gets none.
node a one 1:2 &
node b one 1:2 &
# c must not host the store: the store goes with its host, and c gives up after 4 s, while the
# others still run on it. Whichever launcher binds the port first hosts it.
JOIN_TIMEOUT=4 CONF=,is_host=0 node c two 2:2 &
wait
for n in a b c; do echo "$n exited $(cat $work/$n.rc)"; done
results=$(cat "$work/a.out" "$work/b.out" | grep -c 'RESULT world=4 all_reduce=10 ')
if [ "$(cat $work/a.rc)" != 0 ] || [ "$(cat $work/b.rc)" != 0 ] || [ "$results" != 1 ]; then
  echo "FAIL: two nodes did not run one 4-rank job"; tail -n 20 "$work"/a.err "$work"/b.err; exit 1
fi
grep -h 'rendezvous round 0: node' "$work/a.err" "$work/b.err"
echo "PASS: two nodes met in one round and ran a 4-rank job"
# c either times out alone (its 4 s join timeout) or, when job one ends first and node a takes
# the rendezvous store with it, loses the store: both are one line and no worker ever started.
errors=$(grep -c 'acc-launch: error' "$work/c.err")
if [ "$(cat $work/c.rc)" = 0 ] || [ "$errors" != 1 ] || grep -q RESULT "$work/c.out" ||
  ! grep -qE "rendezvous 'two'|store 127.0.0.1:$port" "$work/c.err"; then
  echo "FAIL: the node of another job"; cat "$work/c.err"; exit 1
fi
grep 'acc-launch: error' "$work/c.err"
echo "PASS: a node with another --rdzv_id never joined job one (exit $(cat $work/c.rc))"

# 3. Nothing listens at the endpoint (a port we bound and closed).
start=$(date +%s%N)
"$launcher" --nnodes 2 --rdzv_backend c10d --rdzv_endpoint 127.0.0.2:$port --rdzv_id x \
  --rdzv_conf join_timeout=2,is_host=0 /bin/true >"$work/d.out" 2>"$work/d.err"
rc=$?
took=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$work/d.err"
lines=$(wc -l <"$work/d.err")
if [ $rc = 0 ] || [ "$lines" != 1 ] || ! grep -q '127.0.0.2' "$work/d.err"; then
  echo "FAIL: unreachable endpoint (exit $rc, $lines lines)"; exit 1
fi
echo "PASS: unreachable endpoint: one line, exit $rc, ${took} ms"

# 4. The port is another program's when the nodes start (it listens and never answers), and that
# program then goes: a node that may host takes the port over, and the two nodes run their job.
/usr/bin/python3 -c 'import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
print("held", flush=True)
time.sleep(3)' $port >"$work/holder.out" &
holder=$!
for _ in $(seq 50); do grep -q held "$work/holder.out" 2>/dev/null && break; sleep 0.1; done
start=$(date +%s%N)
node e three 2:2 &
node f three 2:2 &
wait $holder
wait
took=$(( ($(date +%s%N) - start) / 1000000 ))
results=$(cat "$work/e.out" "$work/f.out" | grep -c 'RESULT world=4 all_reduce=10 ')
if [ "$(cat $work/e.rc)" != 0 ] || [ "$(cat $work/f.rc)" != 0 ] || [ "$results" != 1 ]; then
  echo "FAIL: the nodes did not take the port over once its holder went (exit $(cat $work/e.rc) $(cat $work/f.rc))"
  tail -n 20 "$work"/e.err "$work"/f.err; exit 1
fi
echo "PASS: a port held at the start by another program (3 s) was taken over; the job ran in ${took} ms"

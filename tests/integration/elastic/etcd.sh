#!/usr/bin/env bash
# The elastic rendezvous on a 3-member etcd cluster (Debian's etcd-server, on loopback), three
# launchers each a "node" with 1 PyTorch Gloo worker, --nnodes 2:3 --rdzv_backend etcd-v2:
#   1. the three nodes meet in round 0 through etcd and start a 3-rank job;
#   2. the etcd leader, the member the nodes talk to (first in their --rdzv_endpoint), is killed
#      (SIGKILL) mid-job: a new one is elected, the nodes' heartbeats go on through the others;
#   3. node c's launcher is killed (SIGKILL): a and b meet again in round 1 on the 2 members left
#      and finish the job as a 2-rank world;
#   4. the same two-node command with the same --rdzv_id, twice in a row: both runs succeed (the
#      first run's state, which etcd keeps, does not stop the second);
#   5. SIGINT and SIGTERM to a node waiting in the rendezvous stop it within 1 s (130, 143).
# Nothing may be left running (etcd members, launchers, workers), no data dir left behind.
# Usage: etcd.sh ACC_LAUNCH. Exits 77 (skipped) without etcd, etcdctl or python3-torch, or a
# network namespace of its own (own_loopback.sh).
set -uo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
command -v etcd >/dev/null || { echo "SKIP: no etcd (Debian's etcd-server)"; exit 77; }
command -v etcdctl >/dev/null || { echo "SKIP: no etcdctl (Debian's etcd-client)"; exit 77; }
$python -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }

work=$(mktemp -d /tmp/acc-etcd-XXXXXX)
members=()  # pids of the etcd members
launchers=()
cleanup() {
  for pid in "${launchers[@]}" "${members[@]}"; do kill -9 "$pid" 2>/dev/null; done
  wait 2>/dev/null
  [ -n "${ACC_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
# The worker script lives in $work, so any worker left over is found by its path.
cp "$here/../pytorch/allreduce_loop.py" "$work/job.py"

# A client and a peer port per member, in this script's own network namespace (own_loopback.sh).
ports=(2379 2389 2399 2380 2390 2400)
client() { echo "127.0.0.1:${ports[$1]}"; }
peer() { echo "http://127.0.0.1:${ports[$(($1 + 3))]}"; }
cluster="m0=$(peer 0),m1=$(peer 1),m2=$(peer 2)"
endpoints="$(client 0),$(client 1),$(client 2)"
for i in 0 1 2; do
  etcd --name m$i --data-dir "$work/m$i.etcd" --initial-cluster "$cluster" \
    --initial-cluster-state new --initial-cluster-token "acc-$$" \
    --listen-peer-urls "$(peer $i)" --initial-advertise-peer-urls "$(peer $i)" \
    --listen-client-urls "http://$(client $i)" --advertise-client-urls "http://$(client $i)" \
    >"$work/m$i.log" 2>&1 &
  members+=($!)
done

# The leader's index (0-2) among the members that answer; empty while there is none.
leader() {
  etcdctl --endpoints "$endpoints" --command-timeout 1s endpoint status -w fields 2>/dev/null |
    $python -c '
import re, sys
text = sys.stdin.read()
for block in text.split("\n\n"):
    member = re.search(r"\"MemberID\" : (\d+)", block)
    leader = re.search(r"\"Leader\" : (\d+)", block)
    endpoint = re.search(r"\"Endpoint\" : \"([^\"]+)\"", block)
    if member and leader and member.group(1) == leader.group(1):
        print(sys.argv[1].split(",").index(endpoint.group(1).replace("http://", "")))
        break' "$endpoints"
}
await_leader() {  # await_leader [OLD]: until a leader other than OLD is elected; prints it
  for _ in $(seq 200); do
    l=$(leader)
    [ -n "$l" ] && [ "$l" != "${1:-}" ] && { echo "$l"; return 0; }
    sleep 0.05
  done
  return 1
}
first_leader=$(await_leader) || { echo "FAIL: the etcd cluster never elected a leader"; tail -n 5 "$work"/m*.log; exit 1; }
echo "etcd cluster up at $endpoints; leader m$first_leader"
# The nodes list the leader first, so they talk to it and must move on when it dies.
node_endpoints=$(client $first_leader)
for i in 0 1 2; do [ $i = "$first_leader" ] || node_endpoints="$node_endpoints,$(client $i)"; done

# Round 0's job outlasts the test's checks (3000 steps, a minute), so that only node c's death
# ends it; the survivors' round 1 runs $steps. With 300 in round 0 a slow run could see the job
# finish before its "20 more steps" check after the leader's death, and fail as "stalled".
steps=100
node() {  # node NAME: one launcher, output in $work/NAME.{out,err}
  exec env PYTHON_EXEC=$python HF_HOME=/nonexistent/acc-launch-tests "$launcher" \
    --nnodes 2:3 --nproc_per_node 1 --rdzv_backend etcd-v2 --rdzv_endpoint "$node_endpoints" \
    --rdzv_id "job$$" --max_restarts 3 --shutdown_timeout 5 \
    --rdzv_conf last_call_timeout=1,keep_alive_interval=1,join_timeout=30 \
    "$work/job.py" 3000 $steps >"$work/$1.out" 2>"$work/$1.err"
}
wait_for_step() {  # wait_for_step N FILES...: until a rank 0 has printed step N
  local step=$1; shift
  for _ in $(seq 600); do grep -qs "^\[rank0\]: step $step$" "$@" && return 0; sleep 0.05; done
  return 1
}
node a & launchers+=($!)
node b & launchers+=($!)
node c & launchers+=($!)
wait_for_step 20 "$work"/{a,b,c}.out ||
  { echo "FAIL: the 3-node job never got going"; tail -n 20 "$work"/*.err; exit 1; }
grep -h 'rendezvous round 0' "$work"/{a,b,c}.err
[ "$(grep -h 'rendezvous round 0: node . of 3' "$work"/{a,b,c}.err | sort -u | wc -l)" = 3 ] ||
  { echo "FAIL: the three nodes did not get ranks 0-2 of one round"; exit 1; }
echo "PASS: three nodes met in round 0 through etcd"

kill -9 "${members[$first_leader]}"
new_leader=$(await_leader "$first_leader") ||
  { echo "FAIL: no new etcd leader after killing m$first_leader"; exit 1; }
echo "killed the etcd leader m$first_leader; m$new_leader leads now"
# Every node's heartbeat counter (bumped each keep_alive_interval=1 s) moves on by 2 through the
# members left, and the workers go on.
heartbeats() {
  for rank in 0 1 2; do
    etcdctl --endpoints "$endpoints" --command-timeout 1s get --print-value-only \
      "/acc-launch/rdzv/job$$/0/0/heartbeat/$rank" 2>/dev/null | head -n 1
  done | xargs
}
moved_on() {  # every counter in $now at least 2 past its value in $before
  [ ${#before[@]} = 3 ] && [ ${#now[@]} = 3 ] || return 1
  for i in 0 1 2; do [ "${now[$i]}" -ge $((before[i] + 2)) ] || return 1; done
}
before=($(heartbeats))
for _ in $(seq 200); do
  now=($(heartbeats))
  moved_on && break
  sleep 0.05
done
echo "heartbeats after the leader's death: ${before[*]:-none} -> ${now[*]:-none}"
moved_on || { echo "FAIL: the nodes' heartbeats stopped with the etcd leader"; tail -n 20 "$work"/*.err; exit 1; }
step=$(grep -h '^\[rank0\]: step' "$work"/{a,b,c}.out | tail -n 1 | grep -o '[0-9]*$')
wait_for_step $((step + 20)) "$work"/{a,b,c}.out ||
  { echo "FAIL: the job stalled after the etcd leader was killed"; tail -n 20 "$work"/*.err; exit 1; }

# Not one node met again over it: the leader's death cost the job nothing.
if grep -q 'rendezvous round 1' "$work"/{a,b,c}.err; then
  echo "FAIL: killing the etcd leader made the nodes meet again"; tail -n 20 "$work"/*.err; exit 1
fi
echo "PASS: the job went on through the leader's death, still in round 0"

kill -9 "${launchers[2]}"
wait "${launchers[0]}"; rc_a=$?
wait "${launchers[1]}"; rc_b=$?
wait "${launchers[2]}" 2>/dev/null
grep -h 'rendezvous round 1' "$work"/{a,b}.err
echo "node a exited $rc_a, node b exited $rc_b"
if [ $rc_a != 0 ] || [ $rc_b != 0 ] || ! cat "$work"/{a,b}.out | grep -q "RESULT world=2 steps=$steps"; then
  echo "FAIL: the survivors did not finish as a 2-rank world"; tail -n 30 "$work"/{a,b}.err; exit 1
fi
echo "PASS: etcd leader and node c killed mid-job; a and b met again and finished"

# 4. The etcd members alive, for the runs of the same command.
alive=""
for i in 0 1 2; do [ $i = "$first_leader" ] || alive="${alive:+$alive,}$(client $i)"; done
again() {  # again NAME: one node of the two-node job "again$$"
  env PYTHON_EXEC=$python HF_HOME=/nonexistent/acc-launch-tests "$launcher" \
    --nnodes 2 --nproc_per_node 1 --rdzv_backend etcd-v2 --rdzv_endpoint "$alive" \
    --rdzv_id "again$$" --rdzv_conf last_call_timeout=1,keep_alive_interval=1,join_timeout=30 \
    "$work/job.py" 5 >"$work/$1.out" 2>"$work/$1.err"
}
for run in 1 2; do
  again "run${run}a" & pa=$!
  again "run${run}b" & pb=$!
  wait $pa; ra=$?
  wait $pb; rb=$?
  echo "run $run of the same command (--rdzv_id again$$): exits $ra and $rb"
  if [ $ra != 0 ] || [ $rb != 0 ] || ! cat "$work"/run${run}{a,b}.out | grep -q "RESULT world=2 steps=5"; then
    echo "FAIL: run $run of the same command"; tail -n 20 "$work"/run${run}{a,b}.err; exit 1
  fi
done
echo "PASS: the same command with the same --rdzv_id ran twice in a row"

# 5. SIGINT and SIGTERM to a node waiting in the rendezvous (one of --nnodes 2): 130/143 within 1 s.
for sig in INT TERM; do
  env PYTHON_EXEC=$python "$launcher" --nnodes 2 --nproc_per_node 1 --rdzv_backend etcd-v2 \
    --rdzv_endpoint "$alive" --rdzv_id "sig$sig$$" --rdzv_conf join_timeout=60 \
    "$work/job.py" 5 >"$work/sig$sig.out" 2>"$work/sig$sig.err" &
  pid=$!
  joined=""
  for _ in $(seq 400); do  # until its arrival is in etcd: it waits in round 0
    joined=$(etcdctl --endpoints "$alive" --command-timeout 1s get --print-value-only \
      "/acc-launch/rdzv/sig$sig$$/0/0/joined" 2>/dev/null)
    [ -n "$joined" ] && break
    sleep 0.05
  done
  [ -n "$joined" ] || { echo "FAIL: the node never joined round 0"; cat "$work/sig$sig.err"; exit 1; }
  t0=$(date +%s%N)
  kill -s $sig $pid
  wait $pid
  rc=$?
  took=$((($(date +%s%N) - t0) / 1000000))
  echo "SIG$sig in the etcd rendezvous: exit $rc after ${took} ms"
  want=$([ $sig = INT ] && echo 130 || echo 143)
  [ $rc = "$want" ] && [ $took -lt 1000 ] || { echo "FAIL: SIG$sig in the rendezvous"; exit 1; }
done
echo "PASS: SIGINT and SIGTERM stop a node waiting in the etcd rendezvous within 1 s"

for pid in "${members[@]}"; do kill "$pid" 2>/dev/null; done
wait
left=$(pgrep -f "$work")
[ -z "$left" ] || { echo "FAIL: left running: $(ps -o pid,args -p $left)"; exit 1; }
rm -rf "$work"
[ ! -e "$work" ] || { echo "FAIL: $work left behind"; exit 1; }
echo "PASS: nothing left running, no data dir left behind"

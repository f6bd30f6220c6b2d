#!/usr/bin/env bash
# Jobs of three nodes, each its own network namespace on one bridge (10.231.9.1-3), two Gloo
# workers each (static_job.py loop): a node that falls silent without closing a connection ends a
# static job on every node within the keep-alive window + 2 s (10 s + 2 s by default). The
# static cases beat every 0.5 s (--rdzv_conf keep_alive_interval=0.5: a window of 5 s): the
# bound is the window + 2 s either way, and a finer beat leaves the check a second of slack for a
# loaded machine, where the default's worst case (a beat to see the silence, one to hear of the
# end) is the bound itself.
#   1. node 2 cut off (its bridge port down: its packets are dropped, no connection is closed):
#      nodes 0 and 1 exit 7 naming node 2, node 2 exits 7 naming node 0's store (no answer for
#      the keep-alive window), each within 7 s of the cut; nothing is left in any namespace.
#   2. node 2 frozen (SIGSTOP to every process of its namespace): nodes 0 and 1 exit 7 within
#      7 s naming node 2; thawed, node 2 ends within a few seconds and nothing is left.
#   3. node 0 cut off (it serves the store): every node exits 7 within 7 s.
#   4. An elastic job (--nnodes 2:3, the rendezvous store on node 0, keep-alive 1 s x 5), node 2
#      cut off: node 2 ends within the window + 2 s, naming the store; nodes 0 and 1 meet again
#      without it within the window + last_call_timeout (1 s here; torchrun's default of 30 s
#      waits that long for a third node) + 5 s (stopping the workers, the round, its store
#      check), and finish as a world of 4.
# Usage: partition.sh ACC_LAUNCH (with ACC_TEST_KEEP_LOGS=DIR, the launchers' output is
# copied there at the end). Exits 77 (skipped) without netns rights or python3-torch.
set -uo pipefail
launcher=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
job=$here/static_job.py
$python -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: no iproute2"; exit 77; }

id=$$
bridge=acc-pb-$id
hosts=(acc-p0-$id acc-p1-$id acc-p2-$id)
work=$(mktemp -d /tmp/acc-partition-XXXXXX)
cleanup() {
  for ns in "${hosts[@]}" $bridge; do
    ip netns pids $ns 2>/dev/null | xargs -r kill -CONT 2>/dev/null
    ip netns pids $ns 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del $ns 2>/dev/null
  done
  [ -n "${ACC_TEST_KEEP_LOGS:-}" ] && cp -r "$work" "$ACC_TEST_KEEP_LOGS"
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add $bridge 2>/dev/null || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip -n $bridge link add br0 type bridge && ip -n $bridge link set br0 up ||
  { echo "SKIP: no bridge"; exit 77; }
for i in 0 1 2; do
  ip netns add ${hosts[$i]}
  ip link add eth0 netns ${hosts[$i]} type veth peer name port$i netns $bridge ||
    { echo "SKIP: no veth"; exit 77; }
  ip -n $bridge link set port$i master br0 && ip -n $bridge link set port$i up
  ip -n ${hosts[$i]} addr add 10.231.9.$((i + 1))/24 dev eth0
  ip -n ${hosts[$i]} link set lo up && ip -n ${hosts[$i]} link set eth0 up
done

port=29561
node() {  # node I ARGS...: node I's launcher in its namespace (it execs: run it in a subshell)
  local i=$1; shift
  exec ip netns exec ${hosts[$i]} env GLOO_SOCKET_IFNAME=eth0 PYTHON_EXEC=$python \
    "$launcher" --nnodes 3 --node_rank $i --nproc_per_node 2 \
    --master_addr 10.231.9.1 --master_port $port --shutdown_timeout 3 \
    --rdzv_conf keep_alive_interval=0.5 "$@"
}
. "$here/job_checks.sh"
namespace_pids() { for ns in "${hosts[@]}"; do ip netns pids $ns; done; }
nothing_left() { await_no_pids namespace_pids; }
# start CASE: the job on the three nodes, output in $work/CASE.{0,1,2}.{out,err}, each
# launcher's exit status and time in CASE.I.end; waits until the job is past its first steps.
start() {
  case=$1
  for i in 2 1 0; do
    # The time each launcher exits is taken beside it, not when the checks below get to it.
    ( (node $i "$job" loop 100000 >"$work/$case.$i.out" 2>"$work/$case.$i.err")
      echo "$? $(now)" >"$work/$case.$i.end.tmp"
      mv "$work/$case.$i.end.tmp" "$work/$case.$i.end" ) &
  done
  port=$((port + 1))
  await_line "$work/$case.0.out" 'step 1$' 90 || fail "the job never started"
}
# exit_of CASE I: node I's "STATUS TIME" once its launcher has exited (60 s at most).
exit_of() {
  for _ in $(seq 600); do [ -f "$work/$1.$2.end" ] && break; sleep 0.1; done
  cat "$work/$1.$2.end" 2>/dev/null || fail "node $2's launcher never exited"
}
# ended CASE I STATUS SINCE LIMIT: waits for node I's launcher, checks its status and that it
# ended within LIMIT seconds of SINCE.
ended() {
  local i=$2 status=$3 since=$4 limit=$5 rc at took
  read -r rc at < <(exit_of $1 $i); took=$(seconds "$since" "$at")
  echo "$1: node $i exited $rc ${took}s after the fault"
  [ "$rc" = "$status" ] || fail "node $i exited $rc, expected $status"
  within "$took" $limit || fail "node $i took ${took}s, more than ${limit}s"
}

# 1. node 2 cut off.
start cut_2
ip -n $bridge link set port2 down; cut=$(now)
for i in 0 1 2; do ended cut_2 $i 7 "$cut" 7; done
grep -q "node 2 ended the job: its launcher stopped beating for 5 s (seen by node 0)" \
  "$work/$case.0.err" || fail "node 0 does not name node 2"
grep -q "node 2 ended the job: its launcher stopped beating" "$work/$case.1.err" ||
  fail "node 1 does not name node 2"
lost_store="node 0 (host 10.231.9.1) ended the job: its store at 10.231.9.1:[0-9]* has not answered"
lost_store+=" for the keep-alive window (5 s)"
grep -q "$lost_store" "$work/$case.2.err" || fail "node 2 does not name node 0's store"
ip -n $bridge link set port2 up
nothing_left
echo "PASS: node 2 cut off: every node ended the job within 7 s, nothing left"

# 2. node 2 frozen, then thawed.
start freeze_2
ip netns pids ${hosts[2]} | xargs -r kill -STOP; frozen=$(now)
for i in 0 1; do ended freeze_2 $i 7 "$frozen" 7; done
grep -q "node 2 ended the job: its launcher stopped beating for 5 s (seen by node 0)" \
  "$work/$case.0.err" || fail "node 0 does not name node 2"
ip netns pids ${hosts[2]} | xargs -r kill -CONT; thawed=$(now)
read -r rc at < <(exit_of $case 2); took=$(seconds "$thawed" "$at")
echo "freeze_2: node 2 exited $rc ${took}s after it was thawed"
[ $rc -ne 0 ] || fail "node 2 exited 0 after the job had ended"
within "$took" 12 || fail "node 2 took ${took}s to end once thawed"
nothing_left
echo "PASS: node 2 frozen: nodes 0 and 1 ended the job within 7 s; thawed, node 2 ended in ${took}s"

# 3. node 0 cut off: its store with it.
start cut_0
ip -n $bridge link set port0 down; cut=$(now)
for i in 0 1 2; do ended cut_0 $i 7 "$cut" 7; done
for i in 1 2; do
  grep -q "$lost_store" "$work/$case.$i.err" || fail "node $i does not name node 0's store"
done
ip -n $bridge link set port0 up
nothing_left
echo "PASS: node 0 cut off: every node ended the job within 7 s, nothing left"

# 4. An elastic job, node 2 cut off.
case=elastic_cut_2
for i in 2 1 0; do
  ( (exec ip netns exec ${hosts[$i]} env GLOO_SOCKET_IFNAME=eth0 PYTHON_EXEC=$python \
       "$launcher" --nnodes 2:3 --nproc_per_node 2 --rdzv_backend c10d \
       --rdzv_endpoint 10.231.9.1:$port --rdzv_id partition --local_addr 10.231.9.$((i + 1)) \
       --rdzv_conf last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=5 \
       --max_restarts 3 --shutdown_timeout 3 \
       "$job" loop 200 >"$work/$case.$i.out" 2>"$work/$case.$i.err")
    echo "$? $(now)" >"$work/$case.$i.end.tmp"
    mv "$work/$case.$i.end.tmp" "$work/$case.$i.end" ) &
done
await_line "$work/$case.0.out" 'step 1$' 90 || fail "the job never started"
ip -n $bridge link set port2 down; cut=$(now)
await_line "$work/$case.0.err" 'rendezvous round 1: node 0 of 2' 60 ||
  fail "nodes 0 and 1 never met again"
took=$(seconds "$cut" "$(now)")
echo "$case: nodes 0 and 1 met again ${took}s after the cut"
within "$took" 11 || fail "meeting again took ${took}s (window 5 s, last call 1 s)"
read -r rc at < <(exit_of $case 2); took=$(seconds "$cut" "$at")
echo "$case: node 2 exited $rc ${took}s after the cut"
[ "$rc" != 0 ] || fail "the cut-off node exited 0"
within "$took" 7 || fail "node 2 took ${took}s (window 5 s)"
grep -q "rendezvous store at 10.231.9.1:$port has not answered for the keep-alive window (5 s)" \
  "$work/$case.2.err" || fail "node 2 does not name the rendezvous store"
for i in 0 1; do
  read -r rc at < <(exit_of $case $i)
  [ "$rc" = 0 ] || fail "node $i exited $rc"
done
grep -q 'RESULT world=4 steps=200' "$work/$case.0.out" ||
  fail "the job did not finish as a world of 4"
ip -n $bridge link set port2 up
nothing_left
echo "PASS: elastic, node 2 cut off: node 2 ended, nodes 0 and 1 met again and finished"

#!/usr/bin/env bash
# A static job of three nodes, each its own network namespace on one bridge (10.231.9.1-3), two
# Gloo workers each (static_job.py loop): a node that falls silent without closing a connection
# ends the job on every node within the keep-alive window and a beat (10 s + 2 s by default).
#   1. node 2 cut off (its bridge port down: its packets are dropped, no connection is closed):
#      nodes 0 and 1 exit 7 naming node 2, node 2 exits 7 naming node 0's store (no answer for
#      the keep-alive window), each within 12 s of the cut; nothing is left in any namespace.
#   2. node 2 frozen (SIGSTOP to every process of its namespace): nodes 0 and 1 exit 7 within
#      12 s naming node 2; thawed, node 2 ends within a few seconds and nothing is left.
#   3. node 0 cut off (it serves the store): every node exits 7 within 12 s.
# Usage: static_partition.sh ACC_LAUNCH (with ACC_TEST_KEEP_LOGS=DIR, the launchers' output is
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
    --master_addr 10.231.9.1 --master_port $port --shutdown_timeout 3 "$@"
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
for i in 0 1 2; do ended cut_2 $i 7 "$cut" 12; done
grep -q "node 2 ended the job: its launcher stopped beating for 10 s (seen by node 0)" \
  "$work/$case.0.err" || fail "node 0 does not name node 2"
grep -q "node 2 ended the job: its launcher stopped beating" "$work/$case.1.err" ||
  fail "node 1 does not name node 2"
lost_store="node 0 (host 10.231.9.1) ended the job: its store at 10.231.9.1:[0-9]* has not answered"
lost_store+=" for the keep-alive window (10 s)"
grep -q "$lost_store" "$work/$case.2.err" || fail "node 2 does not name node 0's store"
ip -n $bridge link set port2 up
nothing_left
echo "PASS: node 2 cut off: every node ended the job within 12 s, nothing left"

# 2. node 2 frozen, then thawed.
start freeze_2
ip netns pids ${hosts[2]} | xargs -r kill -STOP; frozen=$(now)
for i in 0 1; do ended freeze_2 $i 7 "$frozen" 12; done
grep -q "node 2 ended the job: its launcher stopped beating for 10 s (seen by node 0)" \
  "$work/$case.0.err" || fail "node 0 does not name node 2"
ip netns pids ${hosts[2]} | xargs -r kill -CONT; thawed=$(now)
read -r rc at < <(exit_of $case 2); took=$(seconds "$thawed" "$at")
echo "freeze_2: node 2 exited $rc ${took}s after it was thawed"
[ $rc -ne 0 ] || fail "node 2 exited 0 after the job had ended"
within "$took" 12 || fail "node 2 took ${took}s to end once thawed"
nothing_left
echo "PASS: node 2 frozen: nodes 0 and 1 ended the job within 12 s; thawed, node 2 ended in ${took}s"

# 3. node 0 cut off: its store with it.
start cut_0
ip -n $bridge link set port0 down; cut=$(now)
for i in 0 1 2; do ended cut_0 $i 7 "$cut" 12; done
for i in 1 2; do
  grep -q "$lost_store" "$work/$case.$i.err" || fail "node $i does not name node 0's store"
done
ip -n $bridge link set port0 up
nothing_left
echo "PASS: node 0 cut off: every node ended the job within 12 s, nothing left"

#!/usr/bin/env bash
# A static job of two nodes, each its own network namespace (a veth pair, 10.231.8.1 and .2) and
# acc-launch with 2 workers (static_job.py): one failure anywhere ends or restarts the whole job.
#   1. A Gloo job in an all_reduce loop; rank 3 (node 1) exits 3: node 0 exits 3 within 8 s of
#      the failure, naming node 1; node 1 exits 3; nothing is left in either namespace.
#   2. The same with workers that never communicate (as ranks in an NCCL collective, which
#      would wait for its timeout): only the launchers can stop node 0's.
#   3. node 1's launcher is killed (SIGKILL): node 0 ends the job within the keep-alive window
#      (10 s, and a beat; exit 7, naming node 1). 4. Then node 0's launcher: node 1 ends it (exit 7, naming node 0).
#   5. --max_restarts 1 and a failure on node 1: both nodes restart, every rank prints
#      restart_count 1, and the job completes on both.
#   6. SIGTERM to node 0 waiting alone at the attempt barrier: it exits 143 within 1 s. SIGINT to
#      node 1 waiting at the exit barrier: it exits 130 within 1 s, and node 0 ends with 130 too.
# Usage: static_fail_fast.sh ACC_LAUNCH (with ACC_TEST_KEEP_LOGS=DIR, the launchers' output is
# copied there at the end). Exits 77 (skipped) without netns rights or python3-torch.
set -uo pipefail
launcher=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
job=$here/static_job.py
$python -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: no iproute2"; exit 77; }

id=$$
a=acc-sa-$id b=acc-sb-$id
va=accsa$id vb=accsb$id
va=${va:0:15} vb=${vb:0:15}
work=$(mktemp -d /tmp/acc-static-XXXXXX)
cleanup() {
  for ns in $a $b; do
    ip netns pids $ns 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del $ns 2>/dev/null
  done
  [ -n "${ACC_TEST_KEEP_LOGS:-}" ] && cp -r "$work" "$ACC_TEST_KEEP_LOGS"
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add $a 2>/dev/null && ip netns add $b || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip link add $va netns $a type veth peer name $vb netns $b || { echo "SKIP: no veth"; exit 77; }
ip -n $a addr add 10.231.8.1/24 dev $va && ip -n $b addr add 10.231.8.2/24 dev $vb
for ns in $a $b; do ip -n $ns link set lo up; done
ip -n $a link set $va up && ip -n $b link set $vb up

port=29531
node() {  # node NS RANK IFACE ARGS... : one launcher in its namespace (run it in a background
          # job: it execs, so $! is the launcher itself)
  local ns=$1 rank=$2 iface=$3; shift 3
  exec ip netns exec $ns env GLOO_SOCKET_IFNAME=$iface PYTHON_EXEC=$python \
    "$launcher" --nnodes 2 --node_rank $rank --nproc_per_node 2 \
    --master_addr 10.231.8.1 --master_port $port --shutdown_timeout 3 ${flags:-} "$@"
}
. "$here/job_checks.sh"
namespace_pids() { ip netns pids $a; ip netns pids $b; }
nothing_left() { await_no_pids namespace_pids; }
# start CASE ARGS...: both nodes in the background, output in $work/CASE.{a,b}.{out,err}
start() {
  case=$1; shift
  node $b 1 $vb "$@" >"$work/$case.b.out" 2>"$work/$case.b.err" &
  launcher_b=$!
  node $a 0 $va "$@" >"$work/$case.a.out" 2>"$work/$case.a.err" &
  launcher_a=$!
  port=$((port + 1))
}

# 1 and 2: a rank of node 1 exits 3.
for mode in loop sleep; do
  if [ $mode = loop ]; then start fail_$mode "$job" loop 100000 3 50 3
  else start fail_$mode "$job" sleep 120 3 6 3; fi
  wait $launcher_a; rc_a=$?; ended=$(now)
  wait $launcher_b; rc_b=$?
  failed=$(sed -n 's/.*failing at //p' "$work/$case.b.out")
  [ -n "$failed" ] || fail "rank 3 never failed"
  took=$(seconds "$failed" "$ended")
  echo "$mode: node 0 exited $rc_a ${took}s after rank 3 on node 1 exited 3; node 1 exited $rc_b"
  [ $rc_a -eq 3 ] && [ $rc_b -eq 3 ] || fail "exit statuses $rc_a and $rc_b, expected 3 and 3"
  within "$took" 8 || fail "node 0 took ${took}s"
  grep -q "acc-launch: error: node 1 (host .*) ended the job: rank 3 exited with 3" "$work/$case.a.err" ||
    fail "node 0 does not name node 1"
  grep -q "root cause (\* above): rank 3 (local rank 1) on node 1 (host .*) exited with 3" \
    "$work/$case.a.err" || fail "node 0's failure table does not name node 1's rank 3"
  nothing_left
  echo "PASS: $mode: a failure on node 1 ends the job on node 0 within ${took}s, naming node 1"
done

# 3. node 1's launcher is killed: node 0's workers never talk to it, only the beats tell.
start kill_b "$job" sleep 120
await_line "$work/$case.a.out" 'restart_count 0' 60 && await_line "$work/$case.b.out" 'restart_count 0' 60 ||
  fail "the job never started"
kill -9 $launcher_b; killed=$(now)
wait $launcher_a; rc_a=$?; took=$(seconds "$killed" "$(now)")
echo "node 0 exited $rc_a ${took}s after node 1's launcher was killed"
[ $rc_a -eq 7 ] || fail "node 0 exited $rc_a, expected 7 (a node lost)"
grep -q "node 1 ended the job: its launcher stopped beating for 10 s (seen by node 0)" \
  "$work/$case.a.err" || fail "node 0 does not name node 1"
within "$took" 14 || fail "node 0 took ${took}s (keep-alive window 10 s, a beat 1 s)"
nothing_left
echo "PASS: node 1's launcher killed: node 0 ended the job in ${took}s, nothing left"

# 4. node 0's launcher is killed (its store goes with it).
start kill_a "$job" sleep 120
await_line "$work/$case.a.out" 'restart_count 0' 60 && await_line "$work/$case.b.out" 'restart_count 0' 60 ||
  fail "the job never started"
kill -9 $launcher_a; killed=$(now)
wait $launcher_b; rc_b=$?; took=$(seconds "$killed" "$(now)")
echo "node 1 exited $rc_b ${took}s after node 0's launcher was killed"
[ $rc_b -eq 7 ] || fail "node 1 exited $rc_b, expected 7"
grep -q "node 0 (host 10.231.8.1) ended the job: its store at 10.231.8.1:.* is gone" \
  "$work/$case.b.err" || fail "node 1 does not name node 0"
within "$took" 8 || fail "node 1 took ${took}s"
nothing_left
echo "PASS: node 0's launcher killed: node 1 ended the job in ${took}s, nothing left"

# 5. A restart on both nodes with the same count.
flags="--max_restarts 1" start restart "$job" loop 60 3 20 3 0
wait $launcher_a; rc_a=$?
wait $launcher_b; rc_b=$?
[ $rc_a -eq 0 ] && [ $rc_b -eq 0 ] || fail "exit statuses $rc_a and $rc_b after a restart"
grep -q 'RESULT world=4 steps=60' "$work/$case.a.out" || fail "the job did not complete"
for r in 0 1; do grep -q "rank $r restart_count 1" "$work/$case.a.out" || fail "rank $r not restarted"; done
for r in 2 3; do grep -q "rank $r restart_count 1" "$work/$case.b.out" || fail "rank $r not restarted"; done
grep -q "restarting (1 of 1)" "$work/$case.a.err" || fail "node 0 says nothing of the restart"
nothing_left
echo "PASS: a failure on node 1 restarted both nodes at restart_count 1 and the job completed"

# 6. Stop signals at the barriers. Node 0 alone waits at the attempt barrier for node 1.
case=barrier
node $a 0 $va "$job" sleep 1 >"$work/$case.a.out" 2>"$work/$case.a.err" &
launcher_a=$!
for _ in $(seq 100); do ip netns exec $a ss -Hltn "sport = :$port" | grep -q . && break; sleep 0.1; done
ip netns exec $a ss -Hltn "sport = :$port" | grep -q . || fail "node 0 never served its store"
kill -TERM $launcher_a; stopped=$(now)
wait $launcher_a; rc_a=$?; took=$(seconds "$stopped" "$(now)")
echo "node 0 at the attempt barrier exited $rc_a ${took}s after SIGTERM"
[ $rc_a -eq 143 ] || fail "exit $rc_a, expected 143"
within "$took" 1 || fail "took ${took}s"
port=$((port + 1))
# Node 1's workers are done at once, node 0's run on: node 1 waits at the exit barrier.
case=exit_barrier
node $a 0 $va "$job" sleep 120 >"$work/$case.a.out" 2>"$work/$case.a.err" &
launcher_a=$!
node $b 1 $vb --no_python sleep 0 >"$work/$case.b.out" 2>"$work/$case.b.err" &
launcher_b=$!
await_line "$work/$case.a.out" 'restart_count 0' 60 || fail "node 0 never started"
sleep 1  # node 1's `sleep 0` workers end within it; had they not, SIGINT would end it alike
kill -INT $launcher_b; stopped=$(now)
wait $launcher_b; rc_b=$?; took=$(seconds "$stopped" "$(now)")
wait $launcher_a; rc_a=$?; took_a=$(seconds "$stopped" "$(now)")
echo "node 1 at the exit barrier exited $rc_b ${took}s after SIGINT; node 0 exited $rc_a ${took_a}s after it"
[ $rc_a -eq 130 ] && [ $rc_b -eq 130 ] || fail "exit statuses $rc_a and $rc_b, expected 130"
within "$took" 1 || fail "took ${took}s"
grep -q "node 1 (host .*) ended the job: its launcher was stopped by SIGINT" "$work/$case.a.err" ||
  fail "node 0 does not name node 1"
nothing_left
echo "PASS: SIGTERM at the attempt barrier and SIGINT at the exit barrier end within 1 s"

#!/usr/bin/env bash
# --network_check (docs/clusters.md, "Checking the nodes' network") on three "hosts": network
# namespaces on one bridge (10.231.31.1-3), an elastic job at --nnodes 2:3 whose rendezvous store
# node a's launcher serves. Every veth is shaped with tbf (this kernel has no netem): a's and b's
# at 200 Mbit/s, c's at 20 Mbit/s (10 times slower), both ends, so that both directions are slow.
#   - every node prints the table and judges the same: node c's launcher exits 93
#     (--no_restart_exit_code) with one line naming the network check and its link, and runs no
#     worker; a and b meet again without it and run the job as its two nodes;
#   - the check's own time, which each node prints, is under 10 s;
#   - where the job cannot go on without it (--nnodes 3:3, or a static job of 3 nodes), c exits
#     93 and the others 3, each naming c and why, and no worker runs;
#   - then, without the slow link, node b's CPU throttled to a twentieth of a core (a cgroup v1 CFS
#     quota): node b stays out for its computation, the other two run the job.
# Usage: network_check.sh ACC_LAUNCH. Exits 77 (skipped) without the right to make network
# namespaces, a bridge, veths or a tbf qdisc.
set -uo pipefail
launcher=$(realpath "$1")
command -v ip >/dev/null || { echo "SKIP: no iproute2"; exit 77; }
command -v tc >/dev/null || { echo "SKIP: no tc"; exit 77; }

id=$$
sw=acc-nsw-$id
cpu=/sys/fs/cgroup/cpu/acc-netcheck-$id
nodes="a b c"
work=$(mktemp -d /tmp/acc-network-check-XXXXXX)
cleanup() {
  for n in $nodes; do
    ip netns pids acc-n$n-$id 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del acc-n$n-$id 2>/dev/null
  done
  ip netns del $sw 2>/dev/null
  rmdir "$cpu" 2>/dev/null
  [ -n "${ACC_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.out "$work"/*.err; do echo "== $f"; cat "$f"; done; exit 1; }

ip netns add $sw 2>/dev/null || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip -n $sw link add br0 type bridge && ip -n $sw link set br0 up || { echo "SKIP: no bridge"; exit 77; }
i=0
for n in $nodes; do
  i=$((i + 1))
  ip netns add acc-n$n-$id
  ip link add v$n$id netns acc-n$n-$id type veth peer name p$n$id netns $sw ||
    { echo "SKIP: no veth"; exit 77; }
  ip -n $sw link set p$n$id master br0 up
  ip -n acc-n$n-$id addr add 10.231.31.$i/24 dev v$n$id
  ip -n acc-n$n-$id link set v$n$id up
  ip -n acc-n$n-$id link set lo up
  rate=200mbit
  [ $n = c ] && rate=20mbit
  # Both ends: the node's sends (its veth) and what the bridge sends it (the peer end).
  ip netns exec acc-n$n-$id tc qdisc add dev v$n$id root tbf rate $rate burst 64kb latency 50ms &&
    ip netns exec $sw tc qdisc add dev p$n$id root tbf rate $rate burst 64kb latency 50ms ||
    { echo "SKIP: no tbf qdisc"; exit 77; }
done

cat >"$work/job.sh" <<'EOF'
#!/bin/sh
echo "START group_rank=$GROUP_RANK world_size=$WORLD_SIZE"
EOF
chmod +x "$work/job.sh"

launch() {  # launch NAME I RUN: node NAME (10.231.31.I) in the background, in $cpu when it is b
  local n=$1 i=$2 run=$3 into=/dev/null
  [ "$run" = cpu ] && [ $n = b ] && into=$cpu/cgroup.procs
  local shape=(--nnodes 2:3 --rdzv_backend c10d --rdzv_endpoint 10.231.31.1:29400
    --rdzv_id netcheck$run$id --rdzv_conf last_call_timeout=2,keep_alive_interval=1,join_timeout=60)
  [ "$run" = full ] && shape[1]=3:3
  [ "$run" = static ] &&
    shape=(--nnodes 3 --node_rank $((i - 1)) --master_addr 10.231.31.1 --master_port 29500)
  sh -c 'echo $$ >"$0" && exec "$@"' "$into" timeout -k 5 90 ip netns exec acc-n$n-$id \
    "$launcher" "${shape[@]}" --nproc_per_node 1 --local_addr 10.231.31.$i --network_check \
    --no_python "$work/job.sh" >"$work/$run-$n.out" 2>"$work/$run-$n.err" &
}

declare -A rc
run_three() {  # run_three RUN: the three nodes, to their ends; their exit statuses in rc
  local run=$1 i=0 pids="" n
  for n in $nodes; do
    i=$((i + 1))
    launch $n $i $run
    pids="$pids $!"
  done
  set -- $pids
  for n in $nodes; do wait "$1"; rc[$n]=$?; shift; done
  echo "$run: exits a=${rc[a]} b=${rc[b]} c=${rc[c]}"
}

ends_job() {  # ends_job RUN WHY: the three nodes; c stays out, and a and b end naming it
  local run=$1 why=$2 n
  run_three $run
  [ "${rc[c]}${rc[a]}${rc[b]}" = 9333 ] || fail "$run: expected c 93, a and b 3"
  grep -q "error: this node takes no part in the job: --network_check: node [0-9] (.*): its best link carries .*; the job cannot go on without it: $why; exit 93" \
    "$work/$run-c.err" || fail "$run: node c did not say why the job cannot go on without it"
  for n in a b; do
    grep -q "error: --network_check: node [0-9] (.*): its best link carries .*; the job cannot go on without it: $why" \
      "$work/$run-$n.err" || fail "$run: node $n did not end naming node c"
  done
  cat "$work/$run-"*.out | grep -q START && fail "$run: a worker ran"
}

run_job() {  # run_job RUN SLOW VERDICT: the three nodes; node SLOW must stay out for VERDICT
  local run=$1 slow=$2 verdict=$3 n
  run_three $run
  [ "${rc[$slow]}" = 93 ] || fail "$run: node $slow exited ${rc[$slow]}, expected 93"
  grep -q "error: this node takes no part in the job: --network_check: node [0-9] (.*): $verdict.*; exit 93 (--no_restart_exit_code)" \
    "$work/$run-$slow.err" || fail "$run: node $slow's launcher did not name the check and why"
  [ ! -s "$work/$run-$slow.out" ] || fail "$run: node $slow ran a worker"
  local others=""
  for n in $nodes; do
    took=$(sed -n 's/.*--network_check: 3 nodes measured in \([0-9.]*\) s.*/\1/p' "$work/$run-$n.err")
    [ -n "$took" ] || fail "$run: node $n did not print the check's time"
    awk -v t="$took" 'BEGIN { exit !(t < 10) }' || fail "$run: node $n's check took $took s"
    echo "$run: node $n: the check took $took s"
    [ $n = $slow ] && continue
    others="$others $work/$run-$n.out"
    [ "${rc[$n]}" = 0 ] || fail "$run: node $n exited ${rc[$n]}, expected 0"
    grep -q -- "--network_check: node [0-9] (.*): $verdict.*; meeting again without it" \
      "$work/$run-$n.err" || fail "$run: node $n did not say it meets again without node $slow"
  done
  [ "$(cat $others | grep -c 'START .* world_size=2$')" = 2 ] ||
    fail "$run: the other two nodes did not run the job as its two nodes"
}

# 1. Node c's link, 10 times slower than the others'.
run_job link c 'its best link carries'
echo "PASS: the node with the slowed link stayed out (93); the other two ran the job"

# Where the job cannot go on without it, it ends, naming the node.
ends_job full '2 node(s) would be left, under --nnodes MIN (3)'
echo "PASS: at --nnodes 3:3 the job ended naming the node with the slowed link"
ends_job static 'a static job needs every node'
echo "PASS: a static job of three nodes ended naming the node with the slowed link"

# 2. No slow link; node b's CPU throttled to a twentieth of a core (cgroup v1's CFS quota).
for n in $nodes; do
  ip netns exec acc-n$n-$id tc qdisc del dev v$n$id root
  ip netns exec $sw tc qdisc del dev p$n$id root
done
if ! mkdir "$cpu" 2>/dev/null || ! echo 100000 >"$cpu/cpu.cfs_period_us" ||
  ! echo 5000 >"$cpu/cpu.cfs_quota_us"; then
  echo "SKIP (CPU): no cgroup v1 cpu controller to throttle a node"
  exit 0
fi
run_job cpu b 'its computation took'
echo "PASS: the node with the throttled CPU stayed out (93); the other two ran the job"

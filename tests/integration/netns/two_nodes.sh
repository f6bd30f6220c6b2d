#!/usr/bin/env bash
# Two nodes, each its own network namespace and address (a veth pair, 10.231.7.1 and .2), each
# running acc-launch with 2 PyTorch Gloo workers:
#   1. a static 2-node job passes its all_reduce check across the nodes, the workers' Gloo
#      interface chosen by the launchers;
#   2. node 0's store listens on 127.0.0.1 and 10.231.7.1 alone; node 1's launcher is killed
#      with SIGKILL mid-job: node 0 stops cleanly with a failure report and a non-zero status, and
#      nothing is left running in either namespace.
# Usage: two_nodes.sh ACC_LAUNCH. Exits 77 (skipped) without netns rights or python3-torch.
set -uo pipefail
launcher=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
$python -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: no iproute2"; exit 77; }

id=$$
a=acc-a-$id b=acc-b-$id
va=acca$id vb=accb$id
va=${va:0:15} vb=${vb:0:15}
work=$(mktemp -d /tmp/acc-netns-XXXXXX)
cleanup() {
  for ns in $a $b; do
    ip netns pids $ns 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del $ns 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add $a 2>/dev/null && ip netns add $b || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip link add $va netns $a type veth peer name $vb netns $b || { echo "SKIP: no veth"; exit 77; }
ip -n $a addr add 10.231.7.1/24 dev $va && ip -n $b addr add 10.231.7.2/24 dev $vb
for ns in $a $b; do ip -n $ns link set lo up; done
ip -n $a link set $va up && ip -n $b link set $vb up

node() {  # node NS RANK IFACE SCRIPT ARGS... : one launcher in its namespace (run it in a
          # subshell or background job: it execs, so $! is the launcher itself); IFACE "-":
          # no GLOO_SOCKET_IFNAME, the launcher's choice
  local ns=$1 rank=$2 iface=$3; shift 3
  local gloo=(GLOO_SOCKET_IFNAME=$iface)
  [ "$iface" = - ] && gloo=(-u GLOO_SOCKET_IFNAME)
  exec ip netns exec $ns env "${gloo[@]}" PYTHON_EXEC=$python \
    "$launcher" --nnodes 2 --node_rank $rank --nproc_per_node 2 \
    --master_addr 10.231.7.1 --master_port 29517 --shutdown_timeout 5 "$@"
}

# 1. The job across two nodes, without GLOO_SOCKET_IFNAME: the hostname resolves to loopback in
#    both namespaces (this machine's /etc/hosts), so each launcher names its workers the interface
#    it reaches node 0 on (otherwise Gloo's connect to 127.0.x.1 is refused).
node $b 1 - "$here/../pytorch/ddp_check.py" >"$work/b.out" 2>"$work/b.err" &
(node $a 0 - "$here/../pytorch/ddp_check.py" >"$work/a.out" 2>"$work/a.err")
rc_a=$?
wait $!
rc_b=$?
sed 's/^/node0: /' "$work/a.out"
if [ $rc_a -ne 0 ] || [ $rc_b -ne 0 ] || ! grep -q 'RESULT world=4 all_reduce=10 ' "$work/a.out"; then
  echo "FAIL: 2-node job (node0 $rc_a, node1 $rc_b)"; tail -20 "$work/a.err" "$work/b.err"; exit 1
fi
echo "PASS: static 2-node job over the veth pair"

# 2. Node 1 dies mid-job.
node $b 1 $vb "$here/../pytorch/allreduce_loop.py" 100000 >"$work/b2.out" 2>"$work/b2.err" &
launcher_b=$!
node $a 0 $va "$here/../pytorch/allreduce_loop.py" 100000 >"$work/a2.out" 2>"$work/a2.err" &
launcher_a=$!
for _ in $(seq 600); do grep -q '^\[rank0\]: step 20$' "$work/a2.out" && break; sleep 0.1; done
grep -q 'step 20' "$work/a2.out" || { echo "FAIL: the job never got going"; tail "$work/a2.err"; exit 1; }
# Node 0's store listens on loopback (its own launcher) and the address node 1 reaches, not on
# every interface.
listening=$(ip netns exec $a ss -ltnpH | grep "pid=$launcher_a," | awk '{print $4}' | sort | xargs)
echo "node0 listens on: $listening"
[ "$listening" = "10.231.7.1:29517 127.0.0.1:29517" ] ||
  { echo "FAIL: node 0 listens on $listening, not 127.0.0.1 and 10.231.7.1 alone"; exit 1; }
kill -9 $launcher_b
started=$(date +%s)
wait $launcher_a
rc_a=$?
took=$(( $(date +%s) - started ))
echo "node0 exited $rc_a ${took}s after node 1 was killed"
grep -q 'FAILED after 1 attempt' "$work/a2.err" || { echo "FAIL: no failure report"; tail -20 "$work/a2.err"; exit 1; }
[ $rc_a -ne 0 ] || { echo "FAIL: node 0 exited 0"; exit 1; }
sleep 0.5
left=$(ip netns pids $a; ip netns pids $b)
[ -z "$left" ] || { echo "FAIL: processes left: $(echo $left | xargs -r ps -o pid,args -p)"; exit 1; }
echo "PASS: node 1 killed, node 0 stopped cleanly, nothing left in either namespace"

#!/usr/bin/env bash
# An elastic job as most users start it, without --local_addr, on three "hosts": network
# namespaces on one bridge (10.231.21.1-3), each with its own hostname (a UTS namespace) and its
# own /etc/hosts (/etc/netns/<ns>/hosts, which `ip netns exec` mounts), 2 PyTorch Gloo workers
# each, --nnodes 3, the rendezvous store served by node a's launcher:
#   1. each hostname resolves to 127.0.1.1 on its own host (Debian's line) and to nothing
#      elsewhere: the round's node 0 publishes the address it reaches the rendezvous from, not its
#      hostname, and the job runs to the end (before that fix, the workers of the other nodes
#      waited in TCPStore's connect for PyTorch's 30 minutes: here, the 60 s bound); nobody sets
#      GLOO_SOCKET_IFNAME: each launcher gives its workers the interface of its address (without
#      it Gloo took 127.0.1.1 from the hostname: "connect [127.0.1.1]:PORT: Connection refused");
#   2. each hostname resolves to the host's own address there, and to nothing elsewhere: the
#      hostname is published, the other nodes cannot reach it, and every node stops with one
#      line naming the address and --local_addr (exit 3) before any worker starts.
# Nothing may be left running. Usage: elastic_hostname.sh ACC_LAUNCH.
# Exits 77 (skipped) without netns rights, unshare or python3-torch.
set -uo pipefail
launcher=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
$python -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: no iproute2"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: no unshare"; exit 77; }

id=$$
sw=acc-hsw-$id
nodes="a b c"
work=$(mktemp -d /tmp/acc-elastic-hostname-XXXXXX)
cleanup() {
  for n in $nodes; do
    ip netns pids acc-h$n-$id 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del acc-h$n-$id 2>/dev/null
    rm -rf "/etc/netns/acc-h$n-$id"
  done
  ip netns del $sw 2>/dev/null
  [ -n "${ACC_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
ip netns add $sw 2>/dev/null || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip -n $sw link add br0 type bridge && ip -n $sw link set br0 up || { echo "SKIP: no bridge"; exit 77; }
i=0
for n in $nodes; do
  i=$((i + 1))
  mkdir -p "/etc/netns/acc-h$n-$id" || { echo "SKIP: cannot write /etc/netns"; exit 77; }
  : >"/etc/netns/acc-h$n-$id/resolv.conf"  # no DNS: a name of another host resolves to nothing
  ip netns add acc-h$n-$id
  ip link add v$n$id netns acc-h$n-$id type veth peer name p$n$id netns $sw || { echo "SKIP: no veth"; exit 77; }
  ip -n $sw link set p$n$id master br0 up
  ip -n acc-h$n-$id addr add 10.231.21.$i/24 dev v$n$id
  ip -n acc-h$n-$id link set v$n$id up
  ip -n acc-h$n-$id link set lo up
done
ip netns exec acc-ha-$id unshare --uts sh -c 'hostname host-a && hostname' >/dev/null 2>&1 ||
  { echo "SKIP: no UTS namespaces"; exit 77; }

hosts_files() {  # hosts_files loopback|own: each host's name on its own host only
  local i=0
  for n in $nodes; do
    i=$((i + 1))
    local own=127.0.1.1
    [ "$1" = own ] && own=10.231.21.$i
    printf '127.0.0.1 localhost\n%s host-%s\n' $own $n >"/etc/netns/acc-h$n-$id/hosts"
  done
}

node() {  # node NAME ARGS...: one launcher on host NAME, without --local_addr; execs
  local n=$1; shift
  exec timeout -k 5 60 ip netns exec acc-h$n-$id unshare --uts sh -c 'hostname "$0" && exec "$@"' \
    host-$n env -u GLOO_SOCKET_IFNAME PYTHON_EXEC=$python HF_HOME=/nonexistent "$launcher" \
    --nnodes 3 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint 10.231.21.1:29400 \
    --rdzv_id job$id --shutdown_timeout 5 \
    --rdzv_conf last_call_timeout=1,keep_alive_interval=1,join_timeout=30 "$@"
}

run_job() {  # run_job: the three nodes, each bounded by 60 s (exit 124 past it); sets rc_N
  rm -f "$work"/*.out "$work"/*.err
  local pids=""
  for n in $nodes; do
    (node $n "$here/static_job.py" loop 20 >"$work/$n.out" 2>"$work/$n.err") &
    pids="$pids $!"
  done
  set -- $pids
  for n in $nodes; do
    wait $1
    eval rc_$n=$?
    shift
  done
}

nothing_left() {
  sleep 0.5
  local left=""
  for n in $nodes; do left="$left$(ip netns pids acc-h$n-$id)"; done
  [ -z "$left" ] || { echo "FAIL: processes left: $(echo $left | xargs -r ps -o pid,args -p)"; exit 1; }
}

# 1. Loopback hostnames: the job runs to the end.
hosts_files loopback
started=$SECONDS
run_job
echo "loopback hostnames: nodes exited $rc_a $rc_b $rc_c in $((SECONDS - started)) s"
grep -h 'the hostname .* resolves to 127.0.1.1 here' "$work"/*.err
if [ "$rc_a $rc_b $rc_c" != "0 0 0" ] || ! grep -q "RESULT world=6 steps=20" "$work"/*.out; then
  echo "FAIL: the job did not run to the end (124: still running after 60 s)"
  tail -n 20 "$work"/*.err; exit 1
fi
if ! grep -q 'the workers. store is published as 10.231.21.[123], the address this node reaches the rendezvous endpoint 10.231.21.1 from' "$work"/*.err; then
  echo "FAIL: no node said which address it published instead of its hostname"; exit 1
fi
nothing_left
echo "PASS: loopback hostnames, no --local_addr: the 6-rank job ran to the end"

# 2. Hostnames that the other hosts cannot resolve: every node stops, naming the address.
hosts_files own
started=$SECONDS
run_job
echo "unresolvable hostnames: nodes exited $rc_a $rc_b $rc_c in $((SECONDS - started)) s"
failed=0
for n in $nodes; do
  line=$(grep '^acc-launch: error: ' "$work/$n.err")
  echo "node $n: $line"
  if [ "$(eval echo \$rc_$n)" != 3 ] || [ "$(grep -c '^acc-launch: error: ' "$work/$n.err")" != 1 ] ||
     ! echo "$line" | grep -q "cannot reach the workers' store at host-a:[0-9]* (.*), the MASTER_ADDR .*: start every launcher with --local_addr"; then
    failed=1
  fi
done
if [ $failed != 0 ] || grep -q "restart_count" "$work"/*.out; then
  echo "FAIL: want exit 3 and one line naming host-a and --local_addr on every node, no worker"
  tail -n 20 "$work"/*.err; exit 1
fi
nothing_left
echo "PASS: hostnames the others cannot resolve: every node stopped naming the address"

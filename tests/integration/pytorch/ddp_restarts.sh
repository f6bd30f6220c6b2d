#!/usr/bin/env bash
# A plain PyTorch DDP script (ddp_restarts.py) whose last rank fails in every attempt but the
# last, under --max_restarts RESTARTS: every restart must work, so the job ends 0 with rank 0's
# RESULT from attempt RESTARTS. PyTorch 2.x's workers no longer prefix their store keys by attempt
# (before the launcher gave each attempt a key space of its own, about one restart in two died
# in init_process_group on the last attempt's Gloo addresses).
#   one_node       acc-launch --nproc_per_node 2 on this host
#   static_nodes   two nodes (network namespaces joined by a veth pair), --nnodes 2 --node_rank
#   c10d_nodes     the same two nodes, --rdzv_backend c10d
# Usage: ddp_restarts.sh ACC_LAUNCH PYTHON FORM RESTARTS. Exits 77 (skipped) where PYTHON lacks
# torch or no network namespace can be made.
set -uo pipefail
launcher=$(realpath "$1")
python=$2
form=$3
restarts=$4
here=$(cd "$(dirname "$0")" && pwd)
script=$here/ddp_restarts.py
if [ -z "$python" ] || ! "$python" -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: $python cannot import torch.distributed"; exit 77
fi
work=$(mktemp -d /tmp/acc-restarts-XXXXXX)
namespaces=()
cleanup() {
  for ns in "${namespaces[@]}"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  [ -n "${ACC_TEST_KEEP_LOGS:-}" ] && cp -r "$work" "$ACC_TEST_KEEP_LOGS"
  rm -rf "$work"
}
trap cleanup EXIT
job=(--max_restarts "$restarts" --python "$python" --monitor_interval 0.1)

# check NAME RC OUT ERR: the job of NAME ended 0 with the last attempt's RESULT.
check() {
  local name=$1 rc=$2 out=$3 err=$4
  local failures
  failures=$(grep -c 'fails in attempt' "$out")
  if [ "$rc" -ne 0 ] || ! grep -q "RESULT attempt=$restarts " "$out"; then
    echo "FAIL: $name exited $rc after $failures of $restarts planned failures"
    tail -25 "$err"
    exit 1
  fi
  echo "PASS: $name: $restarts restarts, the job ended 0 ($(grep RESULT "$out"))"
}

if [ "$form" = one_node ]; then
  source "$here/../own_loopback.sh"
  "$launcher" --nproc_per_node 2 "${job[@]}" "$script" "$restarts" >"$work/out" 2>"$work/err"
  check "one node" $? "$work/out" "$work/err"
  exit 0
fi

command -v ip >/dev/null || { echo "SKIP: no iproute2"; exit 77; }
id=$$
a=acc-ra-$id b=acc-rb-$id
va=accra$id vb=accrb$id
va=${va:0:15} vb=${vb:0:15}
ip netns add $a 2>/dev/null && namespaces+=($a) && ip netns add $b && namespaces+=($b) ||
  { echo "SKIP: cannot create network namespaces"; exit 77; }
ip link add $va netns $a type veth peer name $vb netns $b || { echo "SKIP: no veth"; exit 77; }
ip -n $a addr add 10.231.9.1/24 dev $va && ip -n $b addr add 10.231.9.2/24 dev $vb
for ns in $a $b; do ip -n $ns link set lo up; done
ip -n $a link set $va up && ip -n $b link set $vb up

case $form in
  static_nodes)
    node_args() { echo --nnodes 2 --node_rank $1 --master_addr 10.231.9.1 --master_port 29541; } ;;
  c10d_nodes)
    node_args() {
      echo --nnodes 2 --rdzv_backend c10d --rdzv_endpoint 10.231.9.1:29542 --rdzv_id restarts$id \
        --local_addr 10.231.9.$(($1 + 1)) --rdzv_conf last_call_timeout=1
    } ;;
  *) echo "FAIL: unknown form $form"; exit 2 ;;
esac
node() {  # node NS RANK IFACE: one launcher in its namespace
  ip netns exec "$1" env GLOO_SOCKET_IFNAME="$3" "$launcher" $(node_args "$2") --nproc_per_node 2 \
    "${job[@]}" "$script" "$restarts"
}
node $b 1 $vb >"$work/b.out" 2>"$work/b.err" &
node_b=$!
node $a 0 $va >"$work/a.out" 2>"$work/a.err"
rc_a=$?
wait $node_b
rc_b=$?
[ "$rc_b" -eq 0 ] || { echo "FAIL: node 1 exited $rc_b"; tail -25 "$work/b.err"; exit 1; }
# With c10d the node that serves rank 0 is the one the rendezvous chose.
cat "$work/b.out" >>"$work/a.out"
check "$form" $rc_a "$work/a.out" "$work/a.err"

#!/usr/bin/env bash
# Elastic jobs across network namespaces (each node its own address on a bridge), 2 PyTorch
# Gloo workers per node, the rendezvous store served by node a's launcher:
#   1. three nodes, --nnodes 2:3; node c's launcher is killed (SIGKILL) mid-job: a and b meet
#      again without c and finish the job as a 4-rank world;
#   2. two nodes, --nnodes 2:2; node b is killed: a cannot meet its minimum and stops cleanly
#      (non-zero, one line) once join_timeout runs out.
# Nothing may be left running in any namespace. Usage: elastic_kill.sh ACC_LAUNCH.
# Exits 77 (skipped) without netns rights or python3-torch.
set -uo pipefail
launcher=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
$python -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: no iproute2"; exit 77; }

id=$$
sw=acc-sw-$id
work=$(mktemp -d /tmp/acc-elastic-netns-XXXXXX)
cleanup() {
  for n in a b c; do
    ip netns pids acc-$n-$id 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del acc-$n-$id 2>/dev/null
  done
  ip netns del $sw 2>/dev/null
  [ -n "${ACC_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
ip netns add $sw 2>/dev/null || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip -n $sw link add br0 type bridge && ip -n $sw link set br0 up || { echo "SKIP: no bridge"; exit 77; }
i=0
for n in a b c; do
  i=$((i + 1))
  ip netns add acc-$n-$id
  ip link add v$n$id netns acc-$n-$id type veth peer name p$n$id netns $sw || { echo "SKIP: no veth"; exit 77; }
  ip -n $sw link set p$n$id master br0 up
  ip -n acc-$n-$id addr add 10.231.8.$i/24 dev v$n$id
  ip -n acc-$n-$id link set v$n$id up
  ip -n acc-$n-$id link set lo up
done
addr() { case $1 in a) echo 10.231.8.1;; b) echo 10.231.8.2;; c) echo 10.231.8.3;; esac; }

node() {  # node NAME NNODES ARGS...: one launcher in its namespace; execs, so $! is it
  local n=$1 nnodes=$2; shift 2
  exec ip netns exec acc-$n-$id env GLOO_SOCKET_IFNAME=v$n$id PYTHON_EXEC=$python \
    HF_HOME=/nonexistent "$launcher" --nnodes $nnodes --nproc_per_node 2 --rdzv_backend c10d \
    --rdzv_endpoint 10.231.8.1:29400 --rdzv_id job$id --local_addr $(addr $n) \
    --max_restarts 3 --shutdown_timeout 5 \
    --rdzv_conf last_call_timeout=1,keep_alive_interval=1,join_timeout=${JOIN_TIMEOUT:-60} "$@"
}

wait_for_step() {  # wait_for_step N FILES...: until a rank 0 has printed step N
  local step=$1; shift
  for _ in $(seq 900); do grep -qs "^\[rank0\]: step $step$" "$@" && return 0; sleep 0.1; done
  return 1
}

nothing_left() {
  sleep 0.5
  local left=""
  for n in a b c; do left="$left$(ip netns pids acc-$n-$id)"; done
  [ -z "$left" ] || { echo "FAIL: processes left: $(echo $left | xargs -r ps -o pid,args -p)"; exit 1; }
}

# 1. Three nodes; c dies; a and b carry on.
steps=150
(node a 2:3 "$here/../pytorch/allreduce_loop.py" $steps >"$work/a.out" 2>"$work/a.err") & pa=$!
(node b 2:3 "$here/../pytorch/allreduce_loop.py" $steps >"$work/b.out" 2>"$work/b.err") & pb=$!
node c 2:3 "$here/../pytorch/allreduce_loop.py" $steps >"$work/c.out" 2>"$work/c.err" & pc=$!
wait_for_step 20 "$work"/{a,b,c}.out || { echo "FAIL: the 3-node job never got going"; tail -n 20 "$work"/*.err; exit 1; }
grep -h 'rendezvous round 0' "$work"/{a,b,c}.err
kill -9 $pc
wait $pa; rc_a=$?
wait $pb; rc_b=$?
wait $pc 2>/dev/null
grep -h 'rendezvous round 1' "$work"/{a,b}.err
echo "node a exited $rc_a, node b exited $rc_b"
if [ $rc_a != 0 ] || [ $rc_b != 0 ] || ! cat "$work"/{a,b}.out | grep -q "RESULT world=4 steps=$steps"; then
  echo "FAIL: the survivors did not finish as a 4-rank world"; tail -n 30 "$work"/{a,b}.err; exit 1
fi
nothing_left
echo "PASS: node c killed mid-job; a and b met again and finished as a 4-rank world"

# 2. Two nodes that need both; b dies; a stops cleanly.
rm -f "$work"/*.out "$work"/*.err
(JOIN_TIMEOUT=5 node a 2:2 "$here/../pytorch/allreduce_loop.py" 100000 >"$work/a.out" 2>"$work/a.err") & pa=$!
JOIN_TIMEOUT=5 node b 2:2 "$here/../pytorch/allreduce_loop.py" 100000 >"$work/b.out" 2>"$work/b.err" & pb=$!
wait_for_step 20 "$work"/{a,b}.out || { echo "FAIL: the 2-node job never got going"; tail -n 20 "$work"/*.err; exit 1; }
kill -9 $pb
wait $pa; rc_a=$?
wait $pb 2>/dev/null
tail -n 1 "$work/a.err"
if [ $rc_a = 0 ] || ! tail -n 1 "$work/a.err" | grep -q 'acc-launch: error: .*nodes it needs'; then
  echo "FAIL: node a did not stop cleanly"; tail -n 30 "$work/a.err"; exit 1
fi
nothing_left
echo "PASS: node b killed with --nnodes 2:2; node a stopped cleanly (exit $rc_a)"

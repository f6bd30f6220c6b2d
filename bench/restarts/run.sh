#!/usr/bin/env bash
# Restarts of a plain PyTorch 2.x DDP script (tests/integration/pytorch/ddp_restarts.py: the last
# rank exits 1 at step 5 in every attempt but the last): acc-launch with 20 restarts on one node,
# 10 on two static nodes and 10 on two c10d nodes (network namespaces), each job must end 0; then
# torchrun of the same PyTorch with 20 restarts on one node, side by side: how many of its
# attempts got past init_process_group. Prints the load average.
# Usage: bench/restarts/run.sh [BUILD] [ONE_NODE_RESTARTS] [TWO_NODE_RESTARTS]
set -uo pipefail
build=${1:-build}
one=${2:-20}
two=${3:-10}
here=$(cd "$(dirname "$0")" && pwd)
tests=$here/../../tests/integration/pytorch
python=$(bash "$here/../../scripts/install-python-peers.sh" --python)
launcher=$build/launcher/acc-launch
echo "== restarts of a PyTorch DDP script ($("$python" -c 'import torch; print("torch", torch.__version__)'), load $(cut -d' ' -f1-3 /proc/loadavg))"
bash "$tests/ddp_restarts.sh" "$launcher" "$python" one_node "$one"
bash "$tests/ddp_restarts.sh" "$launcher" "$python" static_nodes "$two"
bash "$tests/ddp_restarts.sh" "$launcher" "$python" c10d_nodes "$two"
# torchrun, one node, in a network namespace of its own (a fixed port).
out=$(mktemp)
unshare --net bash -c 'ip link set lo up && exec "$@"' bash \
  "$python" -m torch.distributed.run --nproc_per_node 2 --max_restarts "$one" --master_port 29561 \
  "$tests/ddp_restarts.py" "$one" >"$out" 2>&1
rc=$?
started=$(grep -c 'fails in attempt' "$out")
ended=$(grep -c 'RESULT attempt' "$out")
echo "torchrun: exit $rc; $((started + ended)) of its attempts got past init_process_group" \
     "($started planned failures reached, job completed: $ended)"
rm -f "$out"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

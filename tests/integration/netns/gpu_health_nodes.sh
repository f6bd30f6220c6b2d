#!/usr/bin/env bash
# Jobs of several nodes where one node has an unfit GPU (docs/launch.md, "GPU health"). Each
# launcher is a "node" that sees one NVIDIA GPU in a fake /proc and asks the fake NVML about it;
# the script runs in a network namespace of its own (only loopback), so its ports are its own.
#   1. Elastic: three launchers at --nnodes 2:2 on one c10d store (`acc-launch rendezvous
#      serve`). Node `bad`, started first, has uncorrected ECC errors: it exits 8 with one line
#      and runs no worker, having taken no place; the other two, one of which would have been a
#      spare, meet and finish the job with world size 2.
#   2. Static, two nodes: node 1 has the bad GPU. Both exit 8, node 1 with its line, node 0 with
#      "node 1 ... ended the job:" and the same words, within seconds (not at the join timeout);
#      node 1 runs no worker.
# Usage: gpu_health_nodes.sh ACC_LAUNCH FAKE_NVML_LIBRARY. Exits 77 (skipped) without the right
# to make a network namespace.
set -uo pipefail
launcher=$(realpath "$1")
fake_nvml=$(realpath "$2")
if [ -z "${ACC_GPU_NODES_NETNS:-}" ]; then
  unshare -n true 2>/dev/null || { echo "SKIP: cannot make a network namespace"; exit 77; }
  exec unshare -n env ACC_GPU_NODES_NETNS=1 bash "$0" "$launcher" "$fake_nvml"
fi
ip link set lo up || exit 1
work=$(mktemp -d /tmp/acc-gpu-spare-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  wait 2>/dev/null
  [ -n "${ACC_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.out "$work"/*.err; do echo "== $f"; cat "$f"; done; exit 1; }

gpus="$work/root/proc/driver/nvidia/gpus/0000:01:00.0"
mkdir -p "$gpus"
printf 'Model: \t\t Fake GPU\nGPU UUID: \t GPU-00000000-fake-4000-8000-000000000000\n' >"$gpus/information"
cat >"$work/job.sh" <<'EOF'
#!/bin/sh
echo "START group_rank=$GROUP_RANK world_size=$WORLD_SIZE"
EOF
chmod +x "$work/job.sh"

# The store, on a port the kernel picks: its first line names it.
"$launcher" rendezvous serve --host 127.0.0.1 --port 0 >"$work/serve.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q 'listening on' "$work/serve.out" && break; sleep 0.1; done
port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/serve.out")
[ -n "$port" ] || fail "rendezvous serve named no port"

node() { # node NAME MODE: one launcher in the background, output in $work/NAME.*
  env -u CUDA_VISIBLE_DEVICES ACC_HOST_ROOT="$work/root" ACC_NVML_LIBRARY="$fake_nvml" \
    ACC_FAKE_NVML="$2" "$launcher" --nnodes 2:2 --nproc_per_node 1 --rdzv_backend c10d \
    --rdzv_endpoint "127.0.0.1:$port" --rdzv_id gpu_spare \
    --rdzv_conf is_host=0,last_call_timeout=1,join_timeout=60 --no_python "$work/job.sh" \
    >"$work/$1.out" 2>"$work/$1.err" &
  pids+=($!)
  eval "pid_$1=$!"
}
node bad ecc
node a healthy
node b healthy
for n in bad a b; do wait "$(eval echo \$pid_$n)"; eval "rc_$n=$?"; done
echo "exits: bad=$rc_bad a=$rc_a b=$rc_b"
[ "$rc_bad" = 8 ] || fail "the node with the unfit GPU exited $rc_bad, expected 8"
[ ! -s "$work/bad.out" ] || fail "the node with the unfit GPU ran a worker"
[ "$(wc -l <"$work/bad.err")" = 1 ] && grep -q '^acc-launch: error: GPU 0 (GPU-00000000-fake-.*): 2 uncorrected ECC error(s) since the driver was loaded; not starting the workers on this node' "$work/bad.err" ||
  fail "not the one line naming the GPU"
[ "$rc_a$rc_b" = 00 ] || fail "the healthy nodes did not finish the job"
[ "$(cat "$work/a.out" "$work/b.out" | grep -c 'START .* world_size=2$')" = 2 ] ||
  fail "the healthy nodes did not meet as the job's two nodes"
echo "PASS (elastic): the node with an unfit GPU took no place; the other two ran the job"

# 2. A static job of two nodes, node 1 with the unfit GPU.
static_node() { # static_node RANK MODE: in the background, output in $work/static$RANK.*
  env -u CUDA_VISIBLE_DEVICES ACC_HOST_ROOT="$work/root" ACC_NVML_LIBRARY="$fake_nvml" \
    ACC_FAKE_NVML="$2" "$launcher" --nnodes 2 --node_rank "$1" --nproc_per_node 1 \
    --master_addr 127.0.0.1 --master_port 29500 --no_python "$work/job.sh" \
    >"$work/static$1.out" 2>"$work/static$1.err" &
  pids+=($!)
  eval "static_$1=$!"
}
began=$(date +%s)
static_node 0 healthy
static_node 1 ecc
wait "$static_0"; rc0=$?
wait "$static_1"; rc1=$?
took=$(($(date +%s) - began))
echo "static: exits node0=$rc0 node1=$rc1 in ${took} s"
[ "$rc0$rc1" = 88 ] || fail "expected both nodes to exit 8"
[ "$took" -lt 60 ] || fail "not ended within seconds: ${took} s"
[ ! -s "$work/static1.out" ] || fail "node 1 ran a worker"
line="GPU 0 (GPU-00000000-fake-4000-8000-000000000000): 2 uncorrected ECC error(s) since the driver was loaded; not starting the workers on this node"
[ "$(wc -l <"$work/static1.err")" = 1 ] && grep -qF "acc-launch: error: $line" "$work/static1.err" ||
  fail "node 1: not the one line naming the GPU"
grep -qF "acc-launch: error: node 1 (host $(hostname)) ended the job: $line" "$work/static0.err" ||
  fail "node 0 does not name node 1 and its GPU"
echo "PASS (static): both nodes ended with 8, node 0 naming node 1's GPU"

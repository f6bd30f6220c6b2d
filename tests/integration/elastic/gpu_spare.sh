#!/usr/bin/env bash
# An elastic job whose node has an unfit GPU (docs/launch.md, "GPU health"): three launchers at
# --nnodes 2:2 on one c10d store (`acc-launch rendezvous serve`, loopback), each a "node" that
# sees one NVIDIA GPU in a fake /proc and asks the fake NVML about it. Node `bad`, started first,
# has uncorrected ECC errors: it exits 8 with one line and runs no worker, having taken no place;
# the other two, one of which would have been a spare, meet and finish the job with world size 2.
# Usage: gpu_spare.sh ACC_LAUNCH FAKE_NVML_LIBRARY.
set -uo pipefail
launcher=$(realpath "$1")
fake_nvml=$(realpath "$2")
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
echo "PASS: the node with an unfit GPU took no place; the other two ran the job"

#!/usr/bin/env bash
# One elastic rendezvous round of N simulated nodes over real TCP, N = 100, 1,000, 10,000:
# acc-launch's rendezvous (rendezvous_scale against `acc-launch rendezvous serve`) and torchrun's
# (torch_rendezvous.py: DynamicRendezvousHandler over PyTorch's TCPStore), side by side.
#   bench/rendezvous_scale/run.sh [BUILD_DIR]   (NODES=30,100,1000,10000 PEER_MAX=1000 CAP_S=60)
# The peer runs up to PEER_MAX nodes (it simulates each node as a Python thread with its own
# TCPStore client; beyond that it measures this script's machine more than torchrun).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
nodes=${NODES:-30,100,1000,10000}
peer_max=${PEER_MAX:-1000}
cap_s=${CAP_S:-60}
python=${PYTHON:-/usr/bin/python3}
if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target rendezvous_scale acc-launch >/dev/null
echo "rendezvous_scale: one round, --nnodes N:N, every node its own TCP connection ($(nproc) cores)"
for n in ${nodes//,/ }; do
  ours=$("$build/bench/rendezvous_scale/rendezvous_scale" "$build/launcher/acc-launch" \
    --nodes "$n" --timeout-s "$cap_s")
  echo "$ours"
  if [ "$n" -gt "$peer_max" ]; then
    printf '%7d  torchrun    not run (above PEER_MAX=%d)\n' "$n" "$peer_max"
    continue
  fi
  theirs=$("$python" bench/rendezvous_scale/torch_rendezvous.py --nodes "$n" --cap-s "$cap_s")
  echo "$theirs"
  awk -v a="$ours" -v b="$theirs" -v n="$n" 'BEGIN {
    if (match(a, /round +[0-9.]+/) && (x = substr(a, RSTART + 6, RLENGTH - 6) + 0) > 0 &&
        match(b, /round +[0-9.]+/) && (y = substr(b, RSTART + 6, RLENGTH - 6) + 0) > 0)
      printf "%7d  ratio       torchrun/acc-launch round time %.1fx\n", n, y / x
  }'
done

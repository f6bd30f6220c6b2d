#!/usr/bin/env bash
# One elastic rendezvous round of N simulated nodes over real TCP: acc-launch's rendezvous
# (rendezvous_scale: epoll-driven nodes doing on the wire what ElasticRendezvous does, against
# `acc-launch rendezvous serve`) and torchrun's (torch_rendezvous.py: DynamicRendezvousHandler
# over PyTorch's TCPStore, a Python thread per node), side by side. Not part of `make test`.
#
# Usage: bench/rendezvous_scale/run.sh [BUILD_DIR]
#   NODES=100,1000,10000,100000  the counts     PEER_MAX=1000  torchrun's largest count
#   CAP_S=90                     each round's bound, and torchrun's
#   PYTHON=/usr/bin/python3      the Python whose torch runs torchrun's handler
# torchrun's peer simulates each node as a Python thread with its own TCPStore client: beyond
# PEER_MAX it measures this script's machine more than torchrun.
#
# It runs in a network namespace of its own with only loopback up where it can (as
# bench/store_scale/run.sh: the nodes' ports and the listener's queue are nobody else's).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
nodes=${NODES:-100,1000,10000,100000}
peer_max=${PEER_MAX:-1000}
cap_s=${CAP_S:-90}
python=${PYTHON:-/usr/bin/python3}
say() { echo "bench/rendezvous_scale/run.sh: $*" >&2; }
if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    $(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) >/dev/null
fi
cmake --build "$build" --target rendezvous_scale acc-launch >/dev/null

# The client processes hold at most 16,000 connections each; the server spreads its connections
# over threads with descriptor tables of their own (rendezvous/src/store_event_loop.h), so neither
# needs a hard limit above the machine's. The soft limit goes up to the hard one.
ulimit -n "$(ulimit -Hn)"

# shellcheck source=bench/common/netns.sh
source bench/common/netns.sh
[ ${#netns[@]} -gt 0 ] || say "cannot make a network namespace: on the machine's loopback"

echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
rc=0
for n in ${nodes//,/ }; do
  ours=$(bounded_in_netns $((2 * cap_s + 60)) "$build/bench/rendezvous_scale/rendezvous_scale" \
    "$build/launcher/acc-launch" --nodes "$n" --timeout-s "$cap_s" | tail -n +2) || rc=1
  echo "${ours:-$(printf '%7d  acc-launch  no result (timed out or failed)' "$n")}"
  if [ "$n" -gt "$peer_max" ]; then
    printf '%7d  torchrun    not run (above PEER_MAX=%d)\n' "$n" "$peer_max"
    continue
  fi
  theirs=$(bounded_in_netns $((cap_s + 120)) "$python" bench/rendezvous_scale/torch_rendezvous.py \
    --nodes "$n" --cap-s "$cap_s" 2>/dev/null) || true
  echo "${theirs:-$(printf '%7d  torchrun    no result' "$n")}  load $(cut -d' ' -f1-3 /proc/loadavg)"
  awk -v a="$ours" -v b="$theirs" -v n="$n" 'BEGIN {
    if (match(a, /round +[0-9.]+/) && (x = substr(a, RSTART + 6, RLENGTH - 6) + 0) > 0 &&
        match(b, /round +[0-9.]+/) && (y = substr(b, RSTART + 6, RLENGTH - 6) + 0) > 0)
      printf "%7d  ratio       torchrun/acc-launch round time %.1fx\n", n, y / x
  }'
done
exit "$rc"

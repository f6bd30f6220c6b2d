#!/usr/bin/env bash
# What a workers' store under init load costs the launcher that serves it: a two-node static job
# on this machine (two launchers, node 0 serving the workers' store and --status_port), then
# store_scale's N ranks against node 0's store (--attach) while /metrics is scraped every 50 ms.
# Prints the scrapes' latency idle and under the load, node 0's CPU during it, and whether both
# launchers (and so their keep-alive through that store) are still up after it.
# Usage: bench/store_scale/launcher_load.sh [BUILD_DIR] [RANKS, default 19000] [TIMEOUT_S, default 60]
# In a network namespace of its own when it may (see run.sh); every wait bounded; both launchers
# stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
ranks=${2:-19000}
timeout_s=${3:-60}
if [ -z "${ACC_LOAD_IN_NETNS:-}" ] && unshare -n true 2>/dev/null; then
  exec env ACC_LOAD_IN_NETNS=1 unshare -n sh -c 'ip link set lo up && exec "$@"' sh bash "$0" "$build" "$ranks" "$timeout_s"
fi
ulimit -n "$(ulimit -Hn)"
cmake --build "$build" --target store_scale acc-launch >/dev/null
python=/usr/bin/python3
dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do timeout 40 tail --pid "$pid" -f /dev/null || kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
port=29511
common=(--nnodes 2 --nproc_per_node 1 --master_addr 127.0.0.1 --master_port "$port")
"$build/launcher/acc-launch" "${common[@]}" --node_rank 0 --status_port 0 \
  --no_python /bin/sleep 600 >"$dir/out0" 2>"$dir/err0" &
pids+=($!)
node0=$!
"$build/launcher/acc-launch" "${common[@]}" --node_rank 1 \
  --no_python /bin/sleep 600 >"$dir/out1" 2>"$dir/err1" &
pids+=($!)
node1=$!
url=
for _ in $(seq 300); do
  url=$(grep -o 'status of the job at http://[^ ]*/' "$dir/err0" | sed 's/.* at //' || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "launcher_load.sh: node 0 printed no status URL:"; cat "$dir/err0"; exit 1; }
sleep 2  # both workers started
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores); $ranks ranks on node 0's store"
echo "idle:        $("$python" bench/store_scale/scrape.py "${url}metrics" --count 40)"
before=$(cpu "$node0")
"$build/bench/store_scale/store_scale" --acc-launch "$build/launcher/acc-launch" \
  --attach "$port:$node0" --ranks "$ranks" --timeout-s "$timeout_s" >"$dir/load" 2>&1 &
load=$!
pids+=($load)
echo "under load:  $("$python" bench/store_scale/scrape.py "${url}metrics" --while-pid "$load")"
wait "$load" || true
after=$(cpu "$node0")
grep -E '^ *[0-9]+ +attached' "$dir/load" || cat "$dir/load"
echo "node 0's CPU during the load: $(awk -v a="$before" -v b="$after" -v t="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f s", (b - a) / t }')"
sleep 3  # a keep-alive period or more after the load
for n in 0 1; do
  pid=$([ "$n" = 0 ] && echo "$node0" || echo "$node1")
  if kill -0 "$pid" 2>/dev/null; then echo "node $n: still running"; else echo "node $n: ended:"; tail -3 "$dir/err$n"; fi
done
echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg)"

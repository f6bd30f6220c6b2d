#!/usr/bin/env bash
# Where the store servers' CPU goes under the bench's load: system calls and context switches
# per operation for each server process (every server store_bench runs: ours, PyTorch's, the
# yardsticks), counted by `perf stat` on the kernel's syscall tracepoints, and a `perf record`
# call graph of ours.
# Needs perf and the rights to trace (root, or perf_event_paranoid <= 1 with tracefs readable).
# Usage: bench/store/profile.sh [BUILD_DIR] [SECONDS] [CLIENTS]
#   BUILD_DIR: a tree with store_bench built, e.g. build-torch2 for PyTorch 2.x's clients.
set -euo pipefail
build=${1:-build}
seconds=${2:-4}
clients=${3:-32}
bench="$build/bench/store/store_bench"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
events=task-clock,context-switches,raw_syscalls:sys_enter
for call in recvfrom sendto read write writev readv epoll_wait epoll_ctl io_uring_enter; do
  events+=",syscalls:sys_enter_$call"
done

timeout -k 5 $((seconds * 12 + 120)) "$bench" --seconds "$seconds" --clients "$clients" \
  --rounds 1 --start_after 3 >"$out/bench" 2>/dev/null &
bench_pid=$!
# The bench prints "# server 'NAME': pid PID, port PORT" for each server once all are forked.
for _ in $(seq 600); do
  grep -q '^c10d::' "$out/bench" 2>/dev/null && break
  grep -q '^# server' "$out/bench" 2>/dev/null && sleep 0.2 && break
  sleep 0.1
done
mapfile -t names < <(sed -n "s/^# server '\(.*\)': pid .*/\1/p" "$out/bench")
mapfile -t pids < <(sed -n "s/^# server '.*': pid \([0-9]*\),.*/\1/p" "$out/bench")
[ "${#pids[@]}" -gt 0 ] || { echo "profile.sh: store_bench started no servers"; exit 1; }
perf_pids=()
for i in "${!pids[@]}"; do
  perf stat -x, -e "$events" -p "${pids[$i]}" -o "$out/$i.stat" &
  perf_pids+=($!)
done
# A call graph of ours (the first server, measured first after --start_after) under load.
sleep 4
perf record -q -F 2000 -g -p "${pids[0]}" -o "$out/ours.data" -- sleep "$((seconds - 2))" \
  >/dev/null 2>&1 || true
wait "$bench_pid" || echo "profile.sh: store_bench failed (exit $?)"
for pid in "${perf_pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
wait "${perf_pids[@]}" 2>/dev/null || true

grep -v '^#' "$out/bench"
uptime
printf '\n%-22s %9s %8s %8s %8s %8s %8s %8s %8s %8s\n' server ops syscalls recv send \
  epoll_w epoll_c uring r/w ctxsw
for i in "${!pids[@]}"; do
  name=${names[$i]}
  ops_per_s=$(awk -v row="$name" 'substr($0, 10, length(row)) == row && substr($0, 10 + length(row), 2) == "  " { print $(NF-3); exit }' "$out/bench")
  ops=$(awk -v r="${ops_per_s:-0}" -v s="$seconds" 'BEGIN { printf "%d", r * s }')
  count() { awk -F, -v e="$1" '$3 == e { print $1; exit }' "$out/$i.stat"; }
  per() { awk -v n="$(count "$1")" -v o="$ops" 'BEGIN { printf "%.2f", o ? (n + 0) / o : 0 }'; }
  rw=$(awk -F, '$3 ~ /sys_enter_(read|write|readv|writev)$/ { n += $1 } END { print n + 0 }' \
    "$out/$i.stat")
  printf '%-22s %9s %8s %8s %8s %8s %8s %8s %8s %8s\n' "$name" "$ops" \
    "$(per raw_syscalls:sys_enter)" "$(per syscalls:sys_enter_recvfrom)" \
    "$(per syscalls:sys_enter_sendto)" "$(per syscalls:sys_enter_epoll_wait)" \
    "$(per syscalls:sys_enter_epoll_ctl)" "$(per syscalls:sys_enter_io_uring_enter)" \
    "$(awk -v n="$rw" -v o="$ops" 'BEGIN { printf "%.2f", o ? n / o : 0 }')" \
    "$(per context-switches)"
done
echo
echo "ours, where the server's CPU goes (perf report --no-children, top entries):"
perf report -i "$out/ours.data" --no-children --sort sym --stdio -g none 2>/dev/null |
  grep -v '^#' | grep '%' | head -30
echo
echo "ours, by call chain of the top entries:"
perf report -i "$out/ours.data" --no-children --sort sym --stdio -g caller,0.5,callee \
  2>/dev/null | grep -v '^#' | sed -n '1,40p'

#!/usr/bin/env bash
# Where the store servers' CPU goes under the bench's load: system calls and context switches
# per operation for each server process (ours, ours with one send per reply, PyTorch's TCPStore,
# the minimal yardstick with one send per reply and with its sends batched), counted
# by `perf stat` on the kernel's syscall tracepoints, and a `perf record` call graph of ours.
# Needs perf and the rights to trace (root, or perf_event_paranoid <= 1 with tracefs readable).
# Usage: bench/store/profile.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
build=${1:-build}
seconds=${2:-4}
bench="$build/bench/store/store_bench"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
events=task-clock,context-switches,raw_syscalls:sys_enter
for call in recvfrom sendto epoll_wait epoll_ctl poll read write; do
  events+=",syscalls:sys_enter_$call"
done

"$bench" --seconds "$seconds" --clients 32 --rounds 1 --start_after 3 >"$out/bench" 2>&1 &
bench_pid=$!
# The bench forks its five servers first, in the order of `names`.
for _ in $(seq 600); do
  [ "$(pgrep -P "$bench_pid" | wc -l)" -ge 5 ] && break
  sleep 0.1
done
mapfile -t servers < <(pgrep -P "$bench_pid" | sort -n)
names=(ours ours_each torch minimal uring)
perf_pids=()
for i in 0 1 2 3 4; do
  perf stat -x, -e "$events" -p "${servers[$i]}" -o "$out/${names[$i]}.stat" &
  perf_pids+=($!)
done
# A call graph of ours while it is under load (it is measured first, after --start_after).
sleep 4
perf record -q -F 2000 -g -p "${servers[0]}" -o "$out/ours.data" -- sleep "$((seconds - 2))" \
  >/dev/null 2>&1 || true
wait "$bench_pid"
for pid in "${perf_pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
wait "${perf_pids[@]}" 2>/dev/null || true

cat "$out/bench"
uptime
rows=("acc StoreServer" "acc, send each" "PyTorch TCPStore" "minimal (bound)" "minimal io_uring")
printf '\n%-10s %10s %8s %8s %8s %8s %8s %8s %8s\n' server ops syscalls recv send epoll_w epoll_c \
  poll/rw ctxsw
for i in 0 1 2 3 4; do
  ops_per_s=$(awk -v row="${rows[$i]}" 'index($0, row) { print $(NF-3); exit }' "$out/bench")
  ops=$(awk -v r="$ops_per_s" -v s="$seconds" 'BEGIN { printf "%d", r * s }')
  count() { awk -F, -v e="$1" '$3 == e { print $1; exit }' "$out/${names[$i]}.stat"; }
  per() { awk -v n="$(count "$1")" -v o="$ops" 'BEGIN { printf "%.2f", (n + 0) / o }'; }
  poll_rw=$(awk -F, '$3 ~ /sys_enter_(poll|read|write)$/ { n += $1 } END { print n + 0 }' \
    "$out/${names[$i]}.stat")
  printf '%-10s %10s %8s %8s %8s %8s %8s %8s %8s\n' "${names[$i]}" "$ops" \
    "$(per raw_syscalls:sys_enter)" "$(per syscalls:sys_enter_recvfrom)" \
    "$(per syscalls:sys_enter_sendto)" "$(per syscalls:sys_enter_epoll_wait)" \
    "$(per syscalls:sys_enter_epoll_ctl)" \
    "$(awk -v n="$poll_rw" -v o="$ops" 'BEGIN { printf "%.2f", n / o }')" \
    "$(per context-switches)"
done
echo
echo "ours, where the server's CPU goes (perf report --no-children, top entries):"
perf report -i "$out/ours.data" --no-children --sort sym --stdio -g none 2>/dev/null |
  grep -v '^#' | grep '%' | head -25
echo
echo "ours, by call chain of the top entry:"
perf report -i "$out/ours.data" --no-children --sort sym --stdio -g caller,0.5,callee \
  2>/dev/null | grep -v '^#' | sed -n '1,30p'

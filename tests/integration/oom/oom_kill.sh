#!/usr/bin/env bash
# A launcher in a memory cgroup limited to 150 MiB whose worker allocates 400 MiB: the kernel's
# OOM killer ends the worker (SIGKILL), and the failure table's root cause says so, naming the
# cgroup, its limit and the worker's peak RSS, instead of a bare "exited with SIGKILL (9)".
# cgroup v1 (memory.oom_control's oom_kill) where the memory controller is mounted there, else
# v2 (memory.events). Skips (77) where no memory cgroup can be made (not root, no controller).
# Usage: oom_kill.sh ACC_LAUNCH
set -u
acc=$1
python=/usr/bin/python3
[ -x "$python" ] || { echo "SKIP: no $python"; exit 77; }
# A cgroup inside this test's own, so that the launcher stays within what holds the test.
v1_own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
v2_own=$(awk -F: '$1 == "0" && $2 == "" {print $3}' /proc/self/cgroup)
v1_own=${v1_own%/}
v2_own=${v2_own%/}
name="acc-oom-test-$$"
if [ -n "$(awk -F: '$2 ~ /(^|,)memory(,|$)/' /proc/self/cgroup)" ] \
   && [ -w "/sys/fs/cgroup/memory$v1_own" ]; then
  version=v1
  path="$v1_own/$name"
  dir=/sys/fs/cgroup/memory$path
elif grep -qw memory "/sys/fs/cgroup$v2_own/cgroup.controllers" 2>/dev/null \
   && [ -w "/sys/fs/cgroup$v2_own" ]; then
  version=v2
  path="$v2_own/$name"
  dir=/sys/fs/cgroup$path
else
  echo "SKIP: no memory cgroup can be made here (cgroup v1 memory or v2 with memory, as root)"
  exit 77
fi
if ! mkdir "$dir" 2>/dev/null; then
  echo "SKIP: cannot make the memory cgroup $dir"
  exit 77
fi
out=$(mktemp -d)
cleanup() {
  # Whatever is left in the cgroup goes first: it cannot be removed with a process in it.
  if [ -f "$dir/cgroup.procs" ]; then
    for pid in $(cat "$dir/cgroup.procs"); do kill -KILL "$pid" 2>/dev/null; done
    for _ in $(seq 50); do [ -s "$dir/cgroup.procs" ] || break; sleep 0.1; done
  fi
  rmdir "$dir" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT
if [ $version = v1 ]; then
  echo $((150 << 20)) > "$dir/memory.limit_in_bytes" || { echo "SKIP: cannot set the limit"; exit 77; }
  # No swap to escape to: the limit is what the worker meets.
  [ -f "$dir/memory.memsw.limit_in_bytes" ] && echo $((150 << 20)) > "$dir/memory.memsw.limit_in_bytes"
  [ -f "$dir/memory.swappiness" ] && echo 0 > "$dir/memory.swappiness"
else
  echo $((150 << 20)) > "$dir/memory.max" || { echo "SKIP: cannot set the limit"; exit 77; }
  [ -f "$dir/memory.swap.max" ] && echo 0 > "$dir/memory.swap.max"
fi
# Rank 1 fills 400 MiB (written, so resident); rank 0 waits to be stopped.
worker='import os, time
if os.environ["RANK"] == "1":
    data = b"\x01" * (400 << 20)
    time.sleep(30)
time.sleep(30)'
status=0
timeout 60 sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$dir" \
  "$acc" --nproc_per_node 2 --no_python "$python" -c "$worker" > "$out/stdout" 2> "$out/stderr" \
  || status=$?
fail() { echo "FAIL: $1"; echo "--- stderr:"; cat "$out/stderr"; exit 1; }
[ $status -eq 137 ] || fail "exit status $status, expected 137 (128 + SIGKILL)"
grep -q "exited with SIGKILL (9)" "$out/stderr" || fail "no SIGKILL in the report"
line=$(grep "cause     :" "$out/stderr") || fail "no cause line in the failure table"
expected="cause     : killed by the kernel's OOM killer: the memory cgroup $path reached its limit (150 MiB); its peak RSS "
case "$line" in
  *"$expected"*" MiB") ;;
  *) fail "cause line: '$line', expected '$expected<N> MiB'" ;;
esac
echo "PASS ($version): $line"

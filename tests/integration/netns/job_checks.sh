# Sourced by the scripts that run a job of several nodes in network namespaces and check how and
# when it ends. They set $work (the folder of the launchers' output), $case (the case's file
# prefix in it) and $python before calling these, and define nothing_left for their namespaces.

now() { date +%s.%N; }
# seconds T0 T1: T1 - T0, two decimals.
seconds() { $python -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$@"; }
# within A B: A <= B.
within() { $python -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)" "$@"; }
# fail MESSAGE: says why, shows the end of the case's output files, exits 1.
fail() { echo "FAIL: $*"; for f in "$work"/$case.*; do echo "--- $f"; tail -25 "$f"; done; exit 1; }
# await_line FILE PATTERN SECONDS: whether FILE has a line matching PATTERN within SECONDS.
await_line() {
  for _ in $(seq $(($3 * 10))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}
# await_no_pids COMMAND...: waits (5 s at most) until COMMAND prints no pid; fails naming the
# processes otherwise.
await_no_pids() {
  local left
  for _ in $(seq 50); do
    left=$("$@")
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  fail "processes left: $(echo $left | xargs -r ps -o pid,args -p)"
}

#!/usr/bin/env bash
# Hot spares and signals in the elastic rendezvous (c10d, loopback), three launchers at
# --nnodes 1:2, each a "node" with one worker (a shell script that prints its environment and
# sleeps):
#   1. the first two meet in one round and finish without a restart (exactly two worker starts);
#      the third waits as a spare, never disturbs them, and ends with exit 0 and one line, all
#      within 45 s;
#   2. a participant's launcher is killed (SIGKILL) mid-job: the survivor sees it silent, the
#      spare takes its place at once (the killed launcher ran on its machine: it knows it gone),
#      the job completes, and TORCHELASTIC_RESTART_COUNT is 1 on both;
#   3. SIGINT and SIGTERM to a launcher waiting in a rendezvous (one node of --nnodes 2) stop it
#      within 1 s with 130 and 143;
#   4. the same for a spare (SIGINT) and for node 0 at the exit barrier (SIGTERM), its worker
#      done while the other node's still runs (the store served apart, so no node hosts it);
#   5. on a standalone `acc-launch rendezvous serve`, which outlives the job, the same two-node
#      PyTorch command with the same --rdzv_id twice in a row: both runs succeed;
#   6. on that server, both participants' launchers killed: the spare sees every one of them
#      silent, opens the next round itself and completes the job (restart count 1).
# Nothing may be left running. Usage: spares.sh ACC_LAUNCH. Runs in a network namespace of its own
# (own_loopback.sh; exits 77 where none can be made).
set -uo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$(realpath "$1")
work=$(mktemp -d /tmp/acc-spares-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  pkill -9 -f "$work/job.sh" 2>/dev/null
  wait 2>/dev/null
  [ -n "${ACC_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.out "$work"/*.err; do echo "== $f"; cat "$f"; done; exit 1; }

# The worker lives in $work, so a worker left over is found by its path.
cat >"$work/job.sh" <<'EOF'
#!/bin/sh
echo "START group_rank=$GROUP_RANK restart_count=$TORCHELASTIC_RESTART_COUNT"
[ "$GROUP_RANK" = 0 ] && sleep "${RANK0_SECONDS:-$JOB_SECONDS}" || sleep "$JOB_SECONDS"
echo "DONE group_rank=$GROUP_RANK restart_count=$TORCHELASTIC_RESTART_COUNT"
EOF
chmod +x "$work/job.sh"
# Each rendezvous on a port of its own, in this script's own network namespace (own_loopback.sh).
port=29400
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# Polls (every 50 ms, up to $2 s) until the command in $1 succeeds.
await() {
  local end=$(($(now_ms) + $2 * 1000))
  until eval "$1"; do [ "$(now_ms)" -lt $end ] || return 1; sleep 0.05; done
}
takes_signals() {  # SigBlk has SIGINT (bit 1) and SIGTERM (bit 14)
  local mask
  mask=$(awk '/^SigBlk/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$mask" ] && [ $((0x$mask & 0x4002)) = $((0x4002)) ]
}
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

node() {  # node NAME PORT NNODES [CONF]: one launcher in the background, output in $work/NAME.*
  JOB_SECONDS=${JOB_SECONDS:-12} RANK0_SECONDS=${RANK0_SECONDS:-} "$launcher" --nnodes "$3" --nproc_per_node 1 \
    --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$2" --rdzv_id spares \
    --rdzv_conf "last_call_timeout=5,keep_alive_interval=1,keep_alive_max_attempt=3${4:-}" \
    "$work/job.sh" >"$work/$1.out" 2>"$work/$1.err" &
  pids+=($!)
  eval "pid_$1=$!"
}
left_over() { pgrep -f "$work/job.sh" >/dev/null; }

# 1. Three nodes for at most two, a 12 s job.
port=$((port + 1))
start=$(now_ms)
node a "$port" 1:2
node b "$port" 1:2
node c "$port" 1:2
for n in a b c; do wait "$(eval echo \$pid_$n)"; eval "rc_$n=$?"; done
took=$(($(now_ms) - start))
starts=$(cat "$work"/[abc].out | grep -c START)
echo "three nodes at 1:2: exits a=$rc_a b=$rc_b c=$rc_c, $starts worker starts, ${took} ms"
[ "$rc_a$rc_b$rc_c" = 000 ] || fail "a node exited non-zero"
[ "$starts" = 2 ] || fail "$starts worker starts, expected exactly 2"
[ "$(cat "$work"/[abc].out | grep -c 'DONE .* restart_count=0')" = 2 ] || fail "a worker did not finish"
[ "$(grep -l 'waits as a spare' "$work"/[abc].err | wc -l)" = 1 ] || fail "not one spare"
spare=$(grep -l 'waits as a spare' "$work"/[abc].err)
[ "$(grep -c 'finished without needing this node' "$spare")" = 1 ] || fail "the spare's line"
[ ! -s "${spare%.err}.out" ] || fail "the spare ran a worker"
[ $took -lt 45000 ] || fail "took ${took} ms, more than 45 s"
left_over && fail "workers left running"
grep -h 'acc-launch' "$work"/[abc].err
echo "PASS: two nodes ran one round, the spare ended with exit 0 (${took} ms)"

# 2. Kill a participant mid-job. a starts first and hosts the store (the store goes with its
# host, so the node killed is one of the others).
port=$((port + 1))
JOB_SECONDS=12 node a "$port" 1:2
await "listening $port" 20 || fail "node a never served the rendezvous store"
JOB_SECONDS=12 node b "$port" 1:2
JOB_SECONDS=12 node c "$port" 1:2
await '[ "$(cat "$work"/[abc].out | grep -c START)" = 2 ]' 30 || fail "the first round never started"
victim=$(grep -l START "$work"/b.out "$work"/c.out | head -n 1)
victim=$(basename "${victim%.out}")
survivor_spare=$([ "$victim" = b ] && echo c || echo b)
kill -9 "$(eval echo \$pid_$victim)"
wait "$(eval echo \$pid_$victim)" 2>/dev/null
echo "killed node $victim's launcher"
for n in a "$survivor_spare"; do wait "$(eval echo \$pid_$n)"; eval "rc_$n=$?"; done
rc_spare=$(eval echo \$rc_$survivor_spare)
echo "after the kill: a exited $rc_a, $survivor_spare exited $rc_spare"
[ "$rc_a" = 0 ] && [ "$rc_spare" = 0 ] || fail "the job did not complete"
grep -q 'DONE group_rank=. restart_count=1' "$work/a.out" || fail "node a: restart count not 1"
grep -q 'DONE group_rank=. restart_count=1' "$work/$survivor_spare.out" ||
  fail "the spare: restart count not 1"
await '! left_over' 10 || fail "workers left running"
grep -h 'acc-launch' "$work/a.err" "$work/$survivor_spare.err"
# The killed launcher ran on the spare's machine: the spare knows it gone (its pid has exited) and
# takes its place at once, not after spare_delay (2 keep-alive intervals, 2 s here).
met=$(grep -o -m1 'attempt 2 started .*rendezvous [0-9.]* ms' "$work/a.err" | grep -o '[0-9.]* ms$')
[ -n "$met" ] && [ "${met%%.*}" -lt 1500 ] ||
  fail "the survivor met the spare after ${met:-?}: the spare waited spare_delay for a launcher gone"
echo "PASS: the spare replaced the killed node (the survivor met it in $met), restart count 1 on both"

# 3. SIGINT and SIGTERM while waiting in a rendezvous that will never form.
for sig in INT TERM; do
  port=$((port + 1))
  node lonely "$port" 2 ",join_timeout=60"
  await "listening $port" 20 || fail "the lonely node never served the rendezvous store"
  t0=$(now_ms)
  kill -s "$sig" "$pid_lonely"
  wait "$pid_lonely"
  rc=$?
  took=$(($(now_ms) - t0))
  want=$([ $sig = INT ] && echo 130 || echo 143)
  echo "SIG$sig in the rendezvous: exit $rc after ${took} ms"
  [ "$rc" = "$want" ] || fail "SIG$sig: exit $rc, expected $want"
  [ $took -lt 1000 ] || fail "SIG$sig: took ${took} ms"
  left_over && fail "workers left running"
done
# A node that is not the store's host, started before it: it waits for the store to come up.
for sig in INT TERM; do
  port=$((port + 1))
  node early "$port" 2 ",join_timeout=60,is_host=0"
  # Until it has taken SIGINT and SIGTERM (blocked, read from a signalfd): from then on a signal
  # reaches its code, not the default action.
  await "takes_signals $pid_early" 10 || fail "the launcher never took its signals"
  t0=$(now_ms)
  kill -s "$sig" "$pid_early"
  wait "$pid_early"
  rc=$?
  took=$(($(now_ms) - t0))
  want=$([ $sig = INT ] && echo 130 || echo 143)
  echo "SIG$sig while waiting for the store's host: exit $rc after ${took} ms"
  [ "$rc" = "$want" ] || fail "SIG$sig before the host: exit $rc, expected $want"
  [ $took -lt 1000 ] || fail "SIG$sig before the host: took ${took} ms"
done
echo "PASS: SIGINT and SIGTERM stop a launcher waiting in a rendezvous"

# 4. A spare, and node 0 at the exit barrier (its worker done after 1 s, node 1's after 60 s).
stop_within_1s() {  # stop_within_1s NAME SIG EXPECTED
  local pid t0 rc took
  pid=$(eval echo \$pid_$1)
  t0=$(now_ms)
  kill -s "$2" "$pid"
  wait "$pid"
  rc=$?
  took=$(($(now_ms) - t0))
  echo "SIG$2 to $3: exit $rc after ${took} ms"
  [ "$rc" = "$4" ] || fail "SIG$2 to $3: exit $rc, expected $4"
  [ $took -lt 1000 ] || fail "SIG$2 to $3: took ${took} ms"
}
# The store is served apart: a launcher that serves it and then joins late becomes the spare
# (seen in CI under load), and stopping it would take the store from the other two.
port=$((port + 1))
"$launcher" rendezvous serve --host 127.0.0.1 --port "$port" >"$work/serve4.out" 2>&1 &
pids+=($!)
await "listening $port" 20 || fail "rendezvous serve never listened"
JOB_SECONDS=60 RANK0_SECONDS=1 node a "$port" 1:2
JOB_SECONDS=60 RANK0_SECONDS=1 node b "$port" 1:2
JOB_SECONDS=60 RANK0_SECONDS=1 node c "$port" 1:2
await '[ "$(grep -l "waits as a spare" "$work"/[abc].err | wc -l)" = 1 ]' 30 || fail "no spare"
spare=$(basename "$(grep -l 'waits as a spare' "$work"/[abc].err)" .err)
stop_within_1s "$spare" INT "the spare" 130
await '[ -n "$(grep -l "DONE group_rank=0" "$work"/[abc].out)" ]' 30 || fail "node 0 never finished"
node0=$(basename "$(grep -l 'DONE group_rank=0' "$work"/[abc].out)" .out)
node1=$(basename "$(grep -l 'START group_rank=1' "$work"/[abc].out)" .out)
stop_within_1s "$node0" TERM "node 0 at the exit barrier" 143
kill -s TERM "$(eval echo \$pid_$node1)"
wait "$(eval echo \$pid_$node1)"
await '! left_over' 10 || fail "workers left running"
echo "PASS: SIGINT to a spare and SIGTERM at the exit barrier stop the launcher within 1 s"

# 5. The same command twice on a standalone store (skipped without python3-torch).
port=$((port + 1))
"$launcher" rendezvous serve --host 127.0.0.1 --port "$port" >"$work/serve.out" 2>&1 &
pids+=($!)
await "listening $port" 20 || fail "rendezvous serve never listened"
if /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
  here=$(cd "$(dirname "$0")" && pwd)
  for run in 1 2; do
    for n in x y; do
      PYTHON_EXEC=/usr/bin/python3 HF_HOME=/nonexistent/acc-launch-tests "$launcher" --nnodes 2 \
        --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$port" \
        --rdzv_id again --rdzv_conf is_host=0,last_call_timeout=1,join_timeout=30 \
        "$here/../pytorch/ddp_check.py" >"$work/run$run$n.out" 2>"$work/run$run$n.err" &
      eval "pid_$n=$!"
    done
    wait "$pid_x"; rx=$?
    wait "$pid_y"; ry=$?
    echo "run $run on rendezvous serve (--rdzv_id again): exits $rx and $ry"
    [ "$rx$ry" = 00 ] && cat "$work"/run$run[xy].out | grep -q 'RESULT world=2 ' ||
      fail "run $run of the same command"
  done
  echo "PASS: the same command with the same --rdzv_id ran twice on one rendezvous server"
else
  echo "SKIP (5): no python3-torch"
fi

# 6. Both participants killed, on the standalone store: nobody is left to meet again but the spare.
rm -f "$work"/[pqr].*
for n in p q r; do node "$n" "$port" 1:2 ",is_host=0"; done
await '[ "$(cat "$work"/[pqr].out 2>/dev/null | grep -c START)" = 2 ]' 30 ||
  fail "the first round never started"
spare=$(basename "$(grep -l 'waits as a spare' "$work"/[pqr].err)" .err)
for n in p q r; do
  [ "$n" = "$spare" ] && continue
  kill -9 "$(eval echo \$pid_$n)"
  wait "$(eval echo \$pid_$n)" 2>/dev/null
done
echo "killed both participants; $spare is the spare"
wait "$(eval echo \$pid_$spare)"
rc=$?
grep -h 'acc-launch' "$work/$spare.err"
[ "$rc" = 0 ] || fail "the spare exited $rc"
grep -q 'DONE group_rank=0 restart_count=1' "$work/$spare.out" || fail "the spare did not finish the job"
await '! left_over' 10 || fail "workers left running"
echo "PASS: with every participant gone, the spare opened the next round and finished the job"

#!/usr/bin/env bash
# A hostile network: while a 2-node static job (two launchers, one PyTorch Gloo DDP rank each)
# trains, clients flood node 0's store (hostile_clients.py: thousands of idle connections,
# random bytes, stalled half frames of 8 MB values, lengths of 2^63, a reader that never reads).
# A third run gives the job a secret and admits its members alone (--rdzv_conf
# job_secret_file=,admit_members_only=true): a launcher without the secret is refused in one
# line with exit 2, and worker-protocol clients from a non-member address (a veth address of
# this namespace) are closed unanswered, with a line on node 0.
# Each job must end 0 with the same RESULT line as the same job run without them, node 0's
# launcher must stay within MEMORY_MB of its resident size without them, and each refusal is
# one line of its log (no line repeated past what log_closes gathers, no stack).
# Usage: hostile_network.sh ACC_LAUNCH PYTHON. Exits 77 (skipped) where PYTHON lacks torch or no
# network namespace can be made.
set -uo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$(realpath "$1")
python=$2
here=$(cd "$(dirname "$0")" && pwd)
script=$here/../../wheel/ddp_until_stop.py
memory_mb=${MEMORY_MB:-128}
flood_seconds=5
"$python" -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: $python lacks torch"; exit 77; }
work=$(mktemp -d /tmp/acc-hostile-XXXXXX)
pids=()
trap 'kill -KILL "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
port=29611

# run NAME [FLOOD [LAUNCHER ARGS...]]: the job; prints node 0's RESULT line; its peak resident KiB
# in $work/NAME.rss.
run() {
  local name=$1 flood=${2:-} peak=0 rss p0 p1 pf=
  shift $(($# < 2 ? $# : 2))
  rm -f "$work/stop"
  for node in 0 1; do
    "$launcher" --nnodes 2 --node_rank $node --nproc_per_node 1 --master_addr 127.0.0.1 \
      --master_port $port "$@" --python "$python" "$script" "$work/never" 300 \
      >"$work/$name.out$node" 2>"$work/$name.err$node" &
    pids+=($!)
    [ $node = 0 ] && p0=$! || p1=$!
  done
  if [ -n "$flood" ]; then
    "$python" "$here/hostile_clients.py" 127.0.0.1 $port "$work/stop" >"$work/$name.flood" 2>&1 &
    pf=$!
    pids+=($pf)
    # With a job secret: a launcher without it tries to join as node 1 (one line, exit 2).
    if [ $# -gt 0 ]; then
      sleep 1
      "$launcher" --nnodes 2 --node_rank 1 --nproc_per_node 1 --master_addr 127.0.0.1 \
        --master_port $port --python "$python" "$script" "$work/never" 300 \
        >"$work/$name.intruder.out" 2>"$work/$name.intruder.err"
      echo $? >"$work/$name.intruder.rc"
    fi
    # The clients stop (and say how the store answered them) while the job still trains.
    (sleep "$flood_seconds"; touch "$work/stop") &
  fi
  while kill -0 "$p0" 2>/dev/null; do
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$p0/status" 2>/dev/null)
    [ -n "$rss" ] && [ "$rss" -gt "$peak" ] && peak=$rss
    sleep 0.05
  done
  wait "$p0"; local c0=$?
  wait "$p1"; local c1=$?
  touch "$work/stop"
  [ -n "$pf" ] && wait "$pf"
  echo "$peak" >"$work/$name.rss"
  echo "$name: node 0 exit $c0, node 1 exit $c1, node 0's launcher peak ${peak} KiB resident"
  [ $c0 -eq 0 ] && [ $c1 -eq 0 ] || { tail -5 "$work/$name.err0" "$work/$name.err1"; return 1; }
}

# A second address of this namespace, a member's of nothing: the strangers' connections come from
# it (STRANGER_FROM) where the stores admit the job's members alone.
ip link add acc-h0 type veth peer name acc-h1 && ip addr add 10.9.0.2/24 dev acc-h0 &&
  ip link set acc-h0 up && ip link set acc-h1 up || { echo "FAIL: cannot make a veth pair"; exit 1; }
head -c 32 /dev/urandom | base64 >"$work/secret" && chmod 600 "$work/secret"

failures=0
run quiet || failures=$((failures + 1))
run flooded flood || failures=$((failures + 1))
cat "$work/flooded.flood"
STRANGER_FROM=10.9.0.2 run members flood \
  --rdzv_conf job_secret_file="$work/secret",admit_members_only=true || failures=$((failures + 1))
cat "$work/members.flood"
quiet=$(grep -h '^\(\[rank0\]: \)\?RESULT' "$work/quiet.out0" "$work/quiet.out1" | sed 's/^\[rank0\]: //')
flooded=$(grep -h '^\(\[rank0\]: \)\?RESULT' "$work/flooded.out0" "$work/flooded.out1" | sed 's/^\[rank0\]: //')
members=$(grep -h '^\(\[rank0\]: \)\?RESULT' "$work/members.out0" "$work/members.out1" | sed 's/^\[rank0\]: //')
echo "without the clients: $quiet"
echo "with them:           $flooded"
echo "admitting members:   $members"
if [ -z "$quiet" ] || [ "$quiet" != "$flooded" ] || [ "$quiet" != "$members" ]; then
  echo "FAIL: the job's result changed under the hostile clients"; failures=$((failures + 1))
fi
# The launcher without the secret: refused in one line, exit 2; the job went on (above).
intruder=$(cat "$work/members.intruder.err")
echo "the launcher without the secret: exit $(cat "$work/members.intruder.rc"): $intruder"
if [ "$(cat "$work/members.intruder.rc")" != 2 ] || [ "$(wc -l <"$work/members.intruder.err")" -ne 1 ] ||
  ! grep -q "this launcher has none" "$work/members.intruder.err"; then
  echo "FAIL: a launcher without the job secret was not refused in one line with exit 2"
  failures=$((failures + 1))
fi
# The strangers: every connection from 10.9.0.2 closed unanswered, in a line of node 0's.
if ! grep -Eq "hostile stranger: [1-9][0-9]* worker-protocol clients from 10.9.0.2, ([0-9]+) closed by the store unanswered" \
  "$work/members.flood" || [ "$(sed -En 's/.*clients from 10.9.0.2, ([0-9]+) closed.*/\1/p' "$work/members.flood")" != \
  "$(sed -En 's/.*stranger: ([0-9]+) worker.*/\1/p' "$work/members.flood")" ]; then
  echo "FAIL: a worker-protocol client from a non-member address was answered"; failures=$((failures + 1))
fi
grep -q 'store: closed .*not a member of the job: 10.9.0.2' "$work/members.err0" ||
  { echo "FAIL: node 0 has no line about the non-member address"; failures=$((failures + 1)); }
grown=$(( ($(cat "$work/flooded.rss") - $(cat "$work/quiet.rss")) / 1024 ))
echo "node 0's launcher grew by $grown MB under the clients (at most $memory_mb)"
[ "$grown" -le "$memory_mb" ] || { echo "FAIL: memory grew past $memory_mb MB"; failures=$((failures + 1)); }
# Each refusal one line: the launcher's own lines about the clients, no more than a screenful.
refusals=$(grep -c 'store: closed' "$work/flooded.err0")
echo "node 0's lines about refused clients: $refusals, the first ones:"
grep 'store: closed' "$work/flooded.err0" | cut -c1-160 | head -4
grep 'store: closed [0-9]' "$work/flooded.err0" | cut -c1-200
if [ "$refusals" -eq 0 ] || [ "$refusals" -gt 60 ]; then
  echo "FAIL: $refusals lines about refused clients (1 to 60 expected)"; failures=$((failures + 1))
fi
if grep -q 'store: closed' "$work/quiet.err0"; then
  echo "FAIL: the job without the clients has lines about refused clients"; failures=$((failures + 1))
fi
[ $failures -eq 0 ] && echo "PASS: the job ran as without the clients" ||
  { echo "node 0's log:"; tail -15 "$work/flooded.err0"; }
exit $((failures > 0))

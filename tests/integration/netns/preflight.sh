#!/usr/bin/env bash
# Pre-flight of node 1 of a static 2-node job, each case in a network namespace of its own:
#   1. no route: a namespace with only its loopback; the master's address has no route;
#   2. filtered: the master's address is on a veth, but nothing answers there (its neighbour
#      entry points at a MAC nobody has, as behind a firewall that drops): timed out;
#   3. loopback: the master's name resolves to 127.0.1.1 in that namespace's /etc/hosts
#      (Debian's line for the machine's own name);
#   4. SIGTERM while the filtered connect is in flight: 143 within a second.
# Each: exactly one error line naming the reason, a non-zero exit, within --preflight_timeout
# (+1 s for a last try), no worker started, nothing left in the namespace.
# Usage: preflight.sh ACC_LAUNCH. Exits 77 (skipped) without netns rights.
set -uo pipefail
launcher=$(realpath "$1")
command -v ip >/dev/null || { echo "SKIP: no iproute2"; exit 77; }

id=$$
ns=acc-pf-$id
veth=accpf$id peer=accpq$id
veth=${veth:0:15} peer=${peer:0:15}
work=$(mktemp -d /tmp/acc-preflight-XXXXXX)
cleanup() {
  ip netns pids $ns 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del $ns 2>/dev/null
  rm -rf "/etc/netns/$ns" "$work"
}
trap cleanup EXIT
mkdir -p "/etc/netns/$ns" 2>/dev/null && printf '127.0.0.1 localhost\n127.0.1.1 node0\n' \
  >"/etc/netns/$ns/hosts" || { echo "SKIP: cannot write /etc/netns"; exit 77; }
ip netns add $ns 2>/dev/null || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip -n $ns link set lo up

failures=0
now_ms() { date +%s%3N; }

# case NAME MASTER_ADDR EXPECTED_RC PATTERN: runs node 1 with --preflight_timeout 2.
case_() {
  local name=$1 addr=$2 want_rc=$3 pattern=$4
  local started=$(now_ms)
  ip netns exec $ns "$launcher" --nnodes 2 --node_rank 1 --master_addr "$addr" \
    --master_port 29500 --preflight_timeout 2 --no_python /bin/echo WORKER_STARTED \
    >"$work/$name.out" 2>"$work/$name.err"
  local rc=$? took=$(( $(now_ms) - started ))
  local errors=$(grep -c '^acc-launch: error: ' "$work/$name.err")
  echo "$name: exit $rc in ${took} ms: $(grep '^acc-launch: error: ' "$work/$name.err")"
  if [ $rc -ne $want_rc ] || [ "$errors" -ne 1 ] || ! grep -q "$pattern" "$work/$name.err" ||
     grep -q WORKER_STARTED "$work/$name.out" || [ $took -gt 8000 ]; then
    echo "FAIL: $name (want exit $want_rc, one line matching '$pattern', within 8 s)"
    cat "$work/$name.err"; failures=$((failures + 1))
  else
    echo "PASS: $name"
  fi
}

case_ no_route 10.231.19.1 3 'at 10.231.19.1:29500: no route'
# A veth with an address, its neighbour entry for the master pointing nowhere.
ip link add $veth netns $ns type veth peer name $peer netns $ns || { echo "SKIP: no veth"; exit 77; }
ip -n $ns addr add 10.231.18.2/24 dev $veth
ip -n $ns link set $veth up && ip -n $ns link set $peer up
ip -n $ns neigh replace 10.231.18.1 lladdr 02:00:00:00:18:01 dev $veth nud permanent
case_ filtered 10.231.18.1 3 'at 10.231.18.1:29500: timed out'
case_ loopback node0 2 'the name node0 resolves to 127.0.1.1 here, a loopback address'

# 4. A stop signal while the connect to the filtered address is in flight.
ip netns exec $ns "$launcher" --nnodes 2 --node_rank 1 --master_addr 10.231.18.1 \
  --master_port 29500 --preflight_timeout 60 --no_python /bin/echo WORKER_STARTED \
  >"$work/term.out" 2>"$work/term.err" &
pid=$!
sleep_until_started() {
  for _ in $(seq 300); do
    [ -n "$(ip netns pids $ns)" ] && grep -q . /proc/$pid/status 2>/dev/null && return
    sleep 0.01
  done
}
sleep_until_started
sleep 0.5  # inside the first connect (its try lasts up to 5 s)
started=$(now_ms)
kill -TERM $pid
wait $pid
rc=$? took=$(( $(now_ms) - started ))
echo "SIGTERM during pre-flight: exit $rc in ${took} ms: $(tail -1 "$work/term.err")"
if [ $rc -ne 143 ] || [ $took -gt 1000 ] || ! grep -q 'during the pre-flight check' "$work/term.err"; then
  echo "FAIL: SIGTERM (want 143 within 1 s)"; cat "$work/term.err"; failures=$((failures + 1))
else
  echo "PASS: SIGTERM during pre-flight"
fi
left=$(ip netns pids $ns)
[ -z "$left" ] || { echo "FAIL: processes left: $left"; failures=$((failures + 1)); }
[ $failures -eq 0 ]

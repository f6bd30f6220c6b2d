#!/usr/bin/env bash
# One command for all nodes: `acc-launch --hostfile` in the host namespace starts each node's
# launcher over ssh, into two network namespaces joined by a bridge (10.231.9.1 and .2), each
# running its own sshd started here (root, key only, port 2222):
#   1. a 2 node x 2 worker PyTorch Gloo job passes its all_reduce check, every line prefixed
#      with its host, with a job secret (ACC_JOB_SECRET_FILE) and admission of members alone;
#      and hosts of 1 and 3 slots number their ranks 0 | 1-3 in a world of 4; arguments with
#      spaces and quotes reach the program intact;
#   2. a worker on node 1 (10.231.9.2) is killed once all four run: node 0 is stopped, the head
#      exits with the worker's status (137) and names the host;
#   3. SIGINT to the head stops every node;
#   4. SIGKILL to the head stops every node too;
#   5. an unreachable host is refused in one line before any worker starts.
# After 2, 3 and 4 nothing but sshd may be left in either namespace. GLOO_SOCKET_IFNAME reaches
# every node from the head's environment (GLOO_* is passed through), so the nodes' interfaces
# share one name, accnet0, each in its own namespace.
# Usage: ssh_fanout.sh ACC_LAUNCH TEST_WORKER. Exits 77 (skipped) without sshd, netns rights
# or python3-torch.
set -uo pipefail
launcher=$(realpath "$1")
worker=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
[ -x /usr/sbin/sshd ] || { echo "SKIP: no /usr/sbin/sshd (openssh-server)"; exit 77; }
command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || { echo "SKIP: no ssh client"; exit 77; }
$python -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: no iproute2"; exit 77; }

# A run stopped before its cleanup (ctest's timeout kills it outright) leaves its namespaces and
# bridge behind, and the bridge's route to 10.231.9.0/24 would take this run's packets to a
# namespace where no sshd listens: remove what runs whose script is gone left.
for stale in $(ip -o link show type bridge | awk -F': ' '{print $2}' | grep -x 'accbr[0-9]*'); do
  pid=${stale#accbr}
  kill -0 "$pid" 2>/dev/null && continue
  for ns in acc-f1-$pid acc-f2-$pid; do
    ip netns pids $ns 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del $ns 2>/dev/null
  done
  ip link del "$stale" && echo "removed a run's leftovers: bridge $stale, namespaces acc-f1-$pid, acc-f2-$pid"
done
if route=$(ip -o route show 10.231.9.0/24) && [ -n "$route" ]; then
  echo "FAIL: 10.231.9.0/24 is already routed on this host ($route); this test needs it"; exit 1
fi

id=$$
n1=acc-f1-$id n2=acc-f2-$id
bridge=accbr$id bridge=${bridge:0:15}
work=$(mktemp -d /tmp/acc-fanout-XXXXXX)
declare -A sshd_pid
cleanup() {
  for ns in $n1 $n2; do
    ip netns pids $ns 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del $ns 2>/dev/null
  done
  ip link del $bridge 2>/dev/null
  [ -n "${ACC_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
ip netns add $n1 2>/dev/null && ip netns add $n2 || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip link add $bridge type bridge && ip addr add 10.231.9.254/24 dev $bridge && ip link set $bridge up \
  || { echo "SKIP: no bridge"; exit 77; }
i=0
for ns in $n1 $n2; do
  i=$((i + 1))
  host_end=accf$i$id host_end=${host_end:0:15}
  ip link add $host_end type veth peer name accnet0 netns $ns || { echo "SKIP: no veth"; exit 77; }
  ip link set $host_end master $bridge up
  ip -n $ns addr add 10.231.9.$i/24 dev accnet0
  ip -n $ns link set accnet0 up
  ip -n $ns link set lo up
done

# sshd in each namespace: generated keys, root by key only.
ssh-keygen -q -t ed25519 -N '' -f "$work/host_key" && ssh-keygen -q -t ed25519 -N '' -f "$work/id" || exit 1
cp "$work/id.pub" "$work/authorized_keys"
mkdir -p /run/sshd && chmod 755 /run/sshd  # sshd's privilege separation directory
cat >"$work/sshd_config" <<EOF
Port 2222
HostKey $work/host_key
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile $work/authorized_keys
StrictModes no
UsePAM no
PidFile none
LogLevel ERROR
EOF
for ns in $n1 $n2; do
  ip netns exec $ns /usr/sbin/sshd -D -e -f "$work/sshd_config" -h "$work/host_key" 2>>"$work/sshd.log" &
  sshd_pid[$ns]=$!
  disown $!  # the cleanup kills it; no "Killed" notice from bash
done
ssh_options=(--ssh_port 2222 --ssh_option "IdentityFile=$work/id" --ssh_option IdentitiesOnly=yes
             --ssh_option StrictHostKeyChecking=no --ssh_option UserKnownHostsFile=/dev/null
             --ssh_option LogLevel=ERROR)
for i in 1 2; do
  for _ in $(seq 100); do
    ssh -p 2222 -i "$work/id" -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
      -o LogLevel=ERROR 10.231.9.$i true 2>/dev/null && break
    sleep 0.1
  done
done
printf '10.231.9.1 slots=2\n10.231.9.2 slots=2\n' >"$work/hosts"

head() {  # head ARGS...: the one command, from the host namespace
  GLOO_SOCKET_IFNAME=accnet0 PYTHON_EXEC=$python \
    "$launcher" --hostfile "$work/hosts" "${ssh_options[@]}" --shutdown_timeout 5 "$@"
}

# Waits (up to 10 s) until nothing but sshd runs in either namespace; says what is left.
nothing_left() {
  local left=""
  for _ in $(seq 100); do
    left=""
    for ns in $n1 $n2; do
      for pid in $(ip netns pids $ns); do [ "$pid" = "${sshd_pid[$ns]}" ] || left="$left $pid"; done
    done
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  echo "processes left:"; ps -o pid,args -p "$(echo $left | tr ' ' ',')"
  return 1
}

# 1. The job, from one command, with a job secret whose file the head's ACC_JOB_SECRET_FILE names
# and its stores admitting the members alone: both reach node 1 over ssh, or node 1's launcher and
# workers are refused.
command head -c 32 /dev/urandom | base64 >"$work/secret" && chmod 600 "$work/secret"
started=$(date +%s.%N)
ACC_JOB_SECRET_FILE=$work/secret head --rdzv_conf admit_members_only=true \
  "$here/../pytorch/ddp_check.py" >"$work/1.out" 2>"$work/1.err"
rc=$?
took=$(echo "$(date +%s.%N) - $started" | bc)
cat "$work/1.out"
if [ $rc -ne 0 ] || ! grep -q '^\[10.231.9.1 rank0\]: RESULT world=4 all_reduce=10 ' "$work/1.out"; then
  echo "FAIL: 2 node x 2 worker job over ssh (exit $rc)"; tail -n 30 "$work/1.err" "$work/sshd.log"; exit 1
fi
echo "PASS: 4-rank Gloo job across two namespaces from one command, with the job secret and admission (exit 0, ${took}s)"

# 1b. Hosts of different sizes (1 and 3 slots): ranks run on across them. `env` needs no store,
# so node 0 may be done before node 1 starts: no pre-flight (a real job's node 0 waits for the
# others in init_process_group).
printf '10.231.9.1 slots=1\n10.231.9.2 slots=3\n' >"$work/hosts_1_3"
GLOO_SOCKET_IFNAME=accnet0 "$launcher" --hostfile "$work/hosts_1_3" "${ssh_options[@]}" \
  --preflight_timeout 0 --no_python "$worker" env >"$work/1b.out" 2>"$work/1b.err"
rc=$?
for expected in '[10.231.9.1 rank0]: RANK=0' '[10.231.9.2 rank1]: RANK=1' '[10.231.9.2 rank3]: RANK=3' \
                '[10.231.9.2 rank3]: WORLD_SIZE=4' '[10.231.9.2 rank3]: LOCAL_WORLD_SIZE=3'; do
  grep -qxF "$expected" "$work/1b.out" || { echo "FAIL: 1+3 slots: no '$expected' (exit $rc)"; cat "$work/1b.out" "$work/1b.err"; exit 1; }
done
[ $rc -eq 0 ] || { echo "FAIL: 1+3 slots exited $rc"; exit 1; }
echo "PASS: hosts with 1 and 3 slots make one 4-rank world (ranks 0 | 1-3)"

# 1c. Arguments with spaces, quotes and shell characters reach the program intact over ssh.
# (printf meets nobody: no pre-flight, as in 1b.)
head --preflight_timeout 0 --no_python printf '<%s>' 'a b' "it's" '"q"' '$HOME' '' 'x;y' >"$work/1c.out" 2>"$work/1c.err"
rc=$?
expected="[10.231.9.2 rank3]: <a b><it's><\"q\"><\$HOME><><x;y>"
[ $rc -eq 0 ] && grep -qxF "$expected" "$work/1c.out" \
  || { echo "FAIL: arguments changed on the way (exit $rc)"; cat "$work/1c.out" "$work/1c.err"; exit 1; }
echo "PASS: arguments arrive intact: $expected"

# 2. Rank 3, on node 1, fails once all four run: node 0 is stopped.
mkdir "$work/2"
head --no_python "$worker" wait "$work/2" >"$work/2.out" 2>"$work/2.err" &
head_pid=$!
for _ in $(seq 300); do [ "$(ls "$work/2" | grep -c '\.ready$')" -eq 4 ] && break; sleep 0.1; done
[ -s "$work/2/3.pid" ] || { echo "FAIL: the 4 workers never started"; cat "$work/2.err"; exit 1; }
kill -9 "$(cat "$work/2/3.pid")"
wait $head_pid
rc=$?
grep -q '^acc-launch: error: node 1 (10.231.9.2) failed with exit status 137' "$work/2.err" \
  || { echo "FAIL: no line naming node 1's host"; cat "$work/2.err"; exit 1; }
[ $rc -eq 137 ] || { echo "FAIL: head exited $rc, not the worker's 137 (SIGKILL)"; cat "$work/2.err"; exit 1; }
# Node 0 ends on node 1's failure by itself (it learns it from its store at once), or is stopped by
# the head, whichever comes first.
grep -Eq '^\[10.231.9.1\]: acc-launch: (stopped by TERM|error: node 1 \(host [^)]*\) ended the job)' "$work/2.err" \
  || { echo "FAIL: node 0 was not stopped"; cat "$work/2.err"; exit 1; }
nothing_left || { echo "FAIL: left running after a node failed"; exit 1; }
echo "PASS: a worker killed on 10.231.9.2 stopped 10.231.9.1; head exit 137 names the host; 0 processes left"

# 3. Ctrl-C on the head stops every node.
mkdir "$work/3"
env --default-signal=INT "$launcher" --hostfile "$work/hosts" "${ssh_options[@]}" --shutdown_timeout 5 \
  --no_python "$worker" wait "$work/3" >"$work/3.out" 2>"$work/3.err" &
head_pid=$!
for _ in $(seq 300); do [ "$(ls "$work/3" | grep -c '\.ready$')" -eq 4 ] && break; sleep 0.1; done
[ "$(ls "$work/3" | grep -c '\.ready$')" -eq 4 ] || { echo "FAIL: the 4 workers never started"; cat "$work/3.err"; exit 1; }
kill -INT $head_pid
wait $head_pid
rc=$?
[ $rc -eq 130 ] || { echo "FAIL: head exited $rc after SIGINT, not 130"; cat "$work/3.err"; exit 1; }
nothing_left || { echo "FAIL: left running after SIGINT"; cat "$work/3.err"; exit 1; }
echo "PASS: SIGINT to the head stopped both nodes (exit 130); 0 processes left"

# 4. The head killed outright (SIGKILL): its ssh children die with it, every remote launcher
# sees its stdin end and stops.
mkdir "$work/5"
# env execs the launcher: $! is the head itself, not a subshell.
env GLOO_SOCKET_IFNAME=accnet0 "$launcher" --hostfile "$work/hosts" "${ssh_options[@]}" \
  --no_python "$worker" wait "$work/5" >"$work/5.out" 2>"$work/5.err" &
head_pid=$!
for _ in $(seq 300); do [ "$(ls "$work/5" | grep -c '\.ready$')" -eq 4 ] && break; sleep 0.1; done
[ "$(ls "$work/5" | grep -c '\.ready$')" -eq 4 ] || { echo "FAIL: the 4 workers never started"; cat "$work/5.err"; exit 1; }
kill -9 $head_pid
wait $head_pid 2>/dev/null
ps -p $head_pid >/dev/null && { echo "FAIL: the head survived SIGKILL?"; exit 1; }
nothing_left || { echo "FAIL: left running after the head was killed"; exit 1; }
echo "PASS: head killed with SIGKILL: 0 processes left on either node"

# 5. An unreachable host: one line, and no worker anywhere.
mkdir "$work/4"
printf '10.231.9.1 slots=2\n10.231.9.254 slots=2\n' >"$work/hosts"
head --no_python "$worker" wait "$work/4" >"$work/4.out" 2>"$work/4.err"
rc=$?
[ $rc -ne 0 ] && [ "$(wc -l <"$work/4.err")" -eq 1 ] \
  && grep -q '^acc-launch: error: cannot reach host 10.231.9.254 over ssh: .*refused' "$work/4.err" \
  || { echo "FAIL: unreachable host (exit $rc)"; cat "$work/4.err"; exit 1; }
[ -z "$(ls "$work/4")" ] && nothing_left || { echo "FAIL: a worker started"; exit 1; }
echo "PASS: unreachable host refused in one line (exit $rc): $(cat "$work/4.err")"

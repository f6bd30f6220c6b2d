#!/usr/bin/env bash
# A real SLURM on this machine (slurmctld, two slurmd nodes, munge), and
#   srun -N2 -c2 acc-launch ddp_check.py
# with no other flag: acc-launch reads nodes, ranks, address and port from SLURM, and the
# 4-rank PyTorch job passes its all_reduce check.
# With a second argument `accelerate_recipe`, the same SLURM runs Accelerate's own recipe
# (accelerate/examples/slurm/submit_multinode.sh) with acc-launch for `accelerate launch`:
#   srun acc-launch --num_processes $((SLURM_NNODES * GPUS_PER_NODE)) --num_machines $SLURM_NNODES
#        --rdzv_backend c10d --main_process_ip $head_node_ip --main_process_port PORT script
# (no --machine_rank: the nodes meet in a c10d rendezvous there), GPUS_PER_NODE=2 CPU workers.
# Without it, then a rank of node 1 exits 3 while the others sleep: both nodes end within seconds
# (fail-fast), and node 0 names node 1.
# Runs in a network namespace of its own (own_loopback.sh), so its SLURM ports are fixed and no
# other test can take them.
# Usage: srun_two_nodes.sh ACC_LAUNCH [accelerate_recipe]. Exits 77 (skipped) without slurm-wlm,
# munge or torch, or a network namespace.
set -uo pipefail
source "$(dirname "$0")/../own_loopback.sh"
# SLURM's daemons look up the address to listen on with AI_ADDRCONFIG, which finds no IPv4 where
# loopback is the only interface ("Unable to resolve (null)"): the namespace gets one more, a
# veth pair on TEST-NET-1 that leads nowhere.
ip link add acc-v0 type veth peer name acc-v1 && ip addr add 192.0.2.1/24 dev acc-v0 &&
  ip link set acc-v0 up && ip link set acc-v1 up ||
  { echo "SKIP: cannot add a veth pair to the test's network namespace"; exit 77; }
launcher=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
for tool in slurmctld slurmd srun munged; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
$python -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: SLURM daemons need root here"; exit 77; }

dir=$(mktemp -d /tmp/acc-slurm-XXXXXX)
chmod 755 "$dir"
mkdir -p "$dir/state" "$dir/spool/n1" "$dir/spool/n2" "$dir/log"
# SLURM's ports, in this namespace alone.
base=17000
cat > "$dir/slurm.conf" <<CONF
ClusterName=acc
SlurmctldHost=localhost
SlurmctldPort=$base
SlurmdPort=$((base + 1))
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((base + 2)) CPUs=2 State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((base + 3)) CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$dir/slurm.conf

started_munge=
cleanup() {
  for pidfile in "$dir"/slurmd.*.pid "$dir"/slurmctld.pid; do
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null
  done
  sleep 0.5
  for pidfile in "$dir"/slurmd.*.pid "$dir"/slurmctld.pid; do
    [ -f "$pidfile" ] && kill -9 "$(cat "$pidfile")" 2>/dev/null
  done
  [ -n "$started_munge" ] && kill "$started_munge" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

if ! pgrep -x munged >/dev/null; then
  mkdir -p /run/munge && chown munge:munge /run/munge 2>/dev/null
  [ -f /etc/munge/munge.key ] || { mungekey -c 2>/dev/null || /usr/sbin/create-munge-key -f; }
  munged --force || { echo "FAIL: munged did not start"; exit 1; }
  started_munge=$(pgrep -x munged | head -1)
fi
slurmctld -f "$SLURM_CONF" || { echo "FAIL: slurmctld"; cat "$dir/log/slurmctld.log"; exit 1; }
slurmd -f "$SLURM_CONF" -N n1 && slurmd -f "$SLURM_CONF" -N n2 || { echo "FAIL: slurmd"; exit 1; }
for _ in $(seq 100); do
  [ "$(sinfo -h -o '%t' 2>/dev/null | sort -u)" = "idle" ] && break
  sleep 0.2
done
sinfo -h -o '%N %t' 2>&1 | sed 's/^/sinfo: /'

cd "$dir"
[ -n "${ACC_SLURM_DEBUG:-}" ] && srun -N2 --ntasks-per-node=1 "$launcher" --dry_run ./x | grep -E "detected|dry run"
if [ "${2:-}" = accelerate_recipe ]; then
  command -v salloc >/dev/null || { echo "SKIP: salloc not installed"; exit 77; }
  # The recipe as Accelerate writes it, two changes: the node names here (n1, n2) do not resolve,
  # so the head node's NodeAddr stands in for its name, and the port is not
  # 29500, so that tests running beside this one do not meet it.
  cat > "$dir/recipe.sh" <<RECIPE
#!/bin/bash
export GPUS_PER_NODE=2
head_node=\$(scontrol show hostnames \$SLURM_JOB_NODELIST | head -n 1)
head_node_ip=\$(scontrol show node \$head_node | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
export LAUNCHER="$launcher \\
    --num_processes \$((SLURM_NNODES * GPUS_PER_NODE)) \\
    --num_machines \$SLURM_NNODES \\
    --rdzv_backend c10d \\
    --main_process_ip \$head_node_ip \\
    --main_process_port $((base + 10)) \\
    "
export SCRIPT="$here/../pytorch/ddp_check.py"
export CMD="\$LAUNCHER \$SCRIPT"
srun \$CMD
RECIPE
  out=$(PYTHON_EXEC=$python timeout 240 salloc -N2 --ntasks-per-node=1 --cpus-per-task=2 \
          bash "$dir/recipe.sh" 2>"$dir/srun.err")
else
  out=$(PYTHON_EXEC=$python timeout 240 srun -N2 --ntasks-per-node=1 --cpus-per-task=2 "$launcher" \
          "$here/../pytorch/ddp_check.py" 2>"$dir/srun.err")
fi
rc=$?
echo "$out" | sed 's/^/srun: /'
if [ $rc -ne 0 ]; then
  echo "FAIL: srun exited $rc"; sed 's/^/stderr: /' "$dir/srun.err" | tail -30; exit 1
fi
if ! echo "$out" | grep -q '^\[rank0\]: RESULT world=4 all_reduce=10 '; then
  echo "FAIL: no 4-rank all_reduce result"; sed 's/^/stderr: /' "$dir/srun.err" | tail -30; exit 1
fi
echo "PASS: srun -N2 acc-launch ran a 4-rank job${2:+ ($2)}"
[ -n "${2:-}" ] && exit 0

# Fail-fast across the two static nodes: rank 3 (node 1) exits 3 after 3 s while the others would
# sleep 120 s. Both launchers end within seconds, srun with 3, and node 0 names node 1.
started=$(date +%s)
PYTHON_EXEC=$python timeout 100 srun -N2 --ntasks-per-node=1 --cpus-per-task=2 "$launcher" \
  --shutdown_timeout 3 "$here/../netns/static_job.py" sleep 120 3 3 3 >"$dir/fail.out" 2>"$dir/fail.err"
rc=$?
took=$(( $(date +%s) - started ))
echo "srun exited $rc ${took}s after it started (rank 3 failed at about 3 s plus start-up)"
grep -E '^acc-launch: error: node' "$dir/fail.err" | sed 's/^/srun: /'
[ $rc -eq 3 ] || { echo "FAIL: srun exited $rc, expected 3"; tail -30 "$dir/fail.err"; exit 1; }
[ $took -lt 60 ] || { echo "FAIL: the job took ${took}s: the other ranks were not stopped"; exit 1; }
[ "$(grep -c 'ended the job: rank 3 exited with 3' "$dir/fail.err")" = 2 ] ||
  { echo "FAIL: not both nodes name node 1"; tail -30 "$dir/fail.err"; exit 1; }
grep -q 'root cause (\* above): rank 3 (local rank 1) on node 1 ' "$dir/fail.err" ||
  { echo "FAIL: node 0's table does not name node 1"; tail -30 "$dir/fail.err"; exit 1; }
echo "PASS: under srun, a failure on node 1 ended both nodes in ${took}s"

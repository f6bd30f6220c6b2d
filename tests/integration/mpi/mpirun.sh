#!/usr/bin/env bash
# Open MPI's mpirun from Debian, on this machine:
#   1. mpirun -np 4 runtime_worker collectives: a LibTorch program using libacc, no launcher;
#      the runtime reads OMPI_COMM_WORLD_* and every collective checks its result;
#   2. mpirun -np 2 acc-launch --nproc_per_node 2 ddp_check.py: one launcher per "node", which
#      reads nodes and ranks from mpirun; the 4-rank PyTorch job passes its all_reduce check.
#   3. the same with rank 3 exiting 3 while the others sleep: both launchers end at once.
# MPI does not say where node 0 is: MASTER_ADDR and MASTER_PORT are exported with -x.
# Usage: mpirun.sh ACC_LAUNCH [RUNTIME_WORKER]. Exits 77 (skipped) without mpirun or torch, or
# without the right to make the network namespace it runs in (own_loopback.sh: its own ports).
set -uo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$(realpath "$1")
worker=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (openmpi-bin)"; exit 77; }
$python -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }
mpi=(mpirun --allow-run-as-root --oversubscribe -x MASTER_ADDR=127.0.0.1 -x HF_HOME=/nonexistent
     -x PYTHON_EXEC=$python)

if [ -n "$worker" ]; then
  out=$(timeout 240 "${mpi[@]}" -x MASTER_PORT=29500 -np 4 "$worker" collectives 2>&1)
  rc=$?
  echo "$out" | tail -n 5 | sed 's/^/mpirun runtime: /'
  [ $rc = 0 ] || { echo "FAIL: mpirun -np 4 runtime_worker collectives exited $rc"; exit 1; }
  echo "PASS: mpirun -np 4 ran the runtime's collectives without a launcher"
fi

out=$(timeout 240 "${mpi[@]}" -x MASTER_PORT=29501 -np 2 \
      "$launcher" --nproc_per_node 2 "$here/../pytorch/ddp_check.py" 2>&1)
rc=$?
echo "$out" | grep -E 'RESULT|error|FAILED' | sed 's/^/mpirun acc-launch: /'
if [ $rc != 0 ] || ! echo "$out" | grep -q 'RESULT world=4 all_reduce=10 '; then
  echo "FAIL: mpirun -np 2 acc-launch (exit $rc)"; echo "$out" | tail -n 30; exit 1
fi
echo "PASS: mpirun -np 2 acc-launch ran a 4-rank job"

# 3. Fail-fast across the two launchers: rank 3 (the second launcher's) exits 3 after 3 s while the
#    others would sleep 120 s. The job ends within seconds, and both launchers name node 1 (as the
#    first launcher's own stop by mpirun comes second to node 1's end of the job).
started=$(date +%s)
out=$(timeout 100 "${mpi[@]}" -x MASTER_PORT=29502 -np 2 "$launcher" --nproc_per_node 2 \
      --shutdown_timeout 3 "$here/../netns/static_job.py" sleep 120 3 3 3 2>&1)
rc=$?
took=$(( $(date +%s) - started ))
echo "$out" | grep -E '^acc-launch: error' | sed 's/^/mpirun acc-launch: /'
echo "mpirun exited $rc after ${took}s"
if [ $rc = 0 ] || [ $took -ge 60 ]; then
  echo "FAIL: a failure on node 1 did not end the job fast"; echo "$out" | tail -n 30; exit 1
fi
if [ "$(echo "$out" | grep -c 'node 1 (host .*) ended the job: rank 3 exited with 3')" != 2 ]; then
  echo "FAIL: not both launchers name node 1"; echo "$out" | tail -n 30; exit 1
fi
echo "PASS: under mpirun, a failure on node 1 ended both launchers in ${took}s"

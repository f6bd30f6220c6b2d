#!/usr/bin/env bash
# Open MPI's mpirun from Debian, on this machine:
#   1. mpirun -np 4 runtime_worker collectives: a LibTorch program using libacc, no launcher;
#      the runtime reads OMPI_COMM_WORLD_* and every collective checks its result;
#   2. mpirun -np 2 acc-launch --nproc_per_node 2 ddp_check.py: one launcher per "node", which
#      reads nodes and ranks from mpirun; the 4-rank PyTorch job passes its all_reduce check.
# MPI does not say where node 0 is: MASTER_ADDR and MASTER_PORT are exported with -x.
# Usage: mpirun.sh ACC_LAUNCH [RUNTIME_WORKER]. Exits 77 (skipped) without mpirun or torch.
set -uo pipefail
launcher=$(realpath "$1")
worker=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (openmpi-bin)"; exit 77; }
$python -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }
free_port() { $python -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])'; }
mpi=(mpirun --allow-run-as-root --oversubscribe -x MASTER_ADDR=127.0.0.1 -x HF_HOME=/nonexistent
     -x PYTHON_EXEC=$python)

if [ -n "$worker" ]; then
  out=$(timeout 240 "${mpi[@]}" -x MASTER_PORT=$(free_port) -np 4 "$worker" collectives 2>&1)
  rc=$?
  echo "$out" | tail -n 5 | sed 's/^/mpirun runtime: /'
  [ $rc = 0 ] || { echo "FAIL: mpirun -np 4 runtime_worker collectives exited $rc"; exit 1; }
  echo "PASS: mpirun -np 4 ran the runtime's collectives without a launcher"
fi

out=$(timeout 240 "${mpi[@]}" -x MASTER_PORT=$(free_port) -np 2 \
      "$launcher" --nproc_per_node 2 "$here/../pytorch/ddp_check.py" 2>&1)
rc=$?
echo "$out" | grep -E 'RESULT|error|FAILED' | sed 's/^/mpirun acc-launch: /'
if [ $rc != 0 ] || ! echo "$out" | grep -q 'RESULT world=4 all_reduce=10 '; then
  echo "FAIL: mpirun -np 2 acc-launch (exit $rc)"; echo "$out" | tail -n 30; exit 1
fi
echo "PASS: mpirun -np 2 acc-launch ran a 4-rank job"

#!/usr/bin/env bash
# HuggingFace Accelerate's own Accelerator, in a script started by `accelerate launch` and by
# acc-launch with the same config file, reaches the same state (distributed type, backend, mixed
# precision, processes, device) and the same reduce result.
# Usage: same_state_as_accelerate_launch.sh ACC_LAUNCH [PYTHON]
# Exits 77 (skipped) where PYTHON cannot import accelerate (Debian has no package of it).
set -euo pipefail
launcher=$1
python=${2:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
if ! "$python" -c 'import accelerate, torch' 2>/dev/null; then
  echo "SKIP: $python cannot import accelerate"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HF_HOME=$work/hf  # no default config file of the machine's

config() {  # NAME DISTRIBUTED_TYPE PROCESSES MIXED_PRECISION USE_CPU
  cat >"$work/$1.yaml" <<YAML
compute_environment: LOCAL_MACHINE
distributed_type: '$2'
num_machines: 1
machine_rank: 0
num_processes: $3
mixed_precision: '$4'
use_cpu: $5
gpu_ids: all
main_training_function: main
YAML
  echo "$work/$1.yaml"
}
configs=("$(config single_cpu NO 1 bf16 true)")
gpus=$("$python" -c 'import torch; print(torch.cuda.device_count())')
if [ "$gpus" -gt 0 ]; then
  configs+=("$(config single_gpu_bf16 NO 1 bf16 false)" "$(config multi_gpu_fp16 MULTI_GPU "$gpus" fp16 false)")
fi

status=0
for cfg in "${configs[@]}"; do
  name=$(basename "$cfg" .yaml)
  theirs=$("$python" -m accelerate.commands.accelerate_cli launch --config_file "$cfg" \
    "$here/accelerate_state.py" 2>/dev/null | grep '^STATE' | sort)
  ours=$("$launcher" --config_file "$cfg" --python "$python" "$here/accelerate_state.py" \
    2>/dev/null | sed -n 's/^\[rank[0-9]*\]: STATE/STATE/p' | sort)
  echo "$name: accelerate launch: $theirs"
  echo "$name: acc-launch:        $ours"
  if [ -z "$ours" ] || [ "$ours" != "$theirs" ]; then
    echo "FAIL: $name: acc-launch's worker reached another state"; status=1
  fi
done
[ $status -eq 0 ] && echo "PASS: ${#configs[@]} config(s), the same state under both launchers"
exit $status

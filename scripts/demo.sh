#!/usr/bin/env bash
# make demo: acc-launch trains the Fashion-MNIST example (BasicNet, global batch 64) over 2 local
# processes for 3 epochs, checkpointing each epoch, and prints the test accuracy.
#   ACC_DEMO_EPOCHS (3), ACC_DEMO_NPROC (2), ACC_DEMO_DATA_DIR, ACC_DEMO_LIMIT (all samples)
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
launcher=$build/launcher/acc-launch
example=$build/examples/fashion_mnist/fashion_mnist
for bin in "$launcher" "$example"; do
  [ -x "$bin" ] || { echo "demo: $bin is missing; run 'make build' (LibTorch needed)" >&2; exit 1; }
done
epochs=${ACC_DEMO_EPOCHS:-3}
nproc=${ACC_DEMO_NPROC:-2}
data_dir=${ACC_DEMO_DATA_DIR:-/usr/share/datasets/fashion-mnist}
extra=()
[ -n "${ACC_DEMO_LIMIT:-}" ] && extra+=(--limit "$ACC_DEMO_LIMIT")
work=$(mktemp -d /tmp/acc-demo-XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "demo: $launcher --nproc_per_node $nproc $example --epochs $epochs"
start=$(date +%s)
"$launcher" --nproc_per_node "$nproc" "$example" --epochs "$epochs" --data-dir "$data_dir" \
  --checkpoint-dir "$work/checkpoint" "${extra[@]}" 2>&1 | tee "$work/log"
seconds=$(( $(date +%s) - start ))
accuracy=$(sed -n 's/.*final test accuracy: \([0-9.]*\).*/\1/p' "$work/log" | tail -1)
[ -n "$accuracy" ] || { echo "demo: the run printed no accuracy" >&2; exit 1; }
echo "demo: test accuracy ${accuracy}% after $epochs epochs on $nproc processes, ${seconds} s wall"
if [ -z "${ACC_DEMO_LIMIT:-}" ] && [ "$epochs" -ge 3 ]; then
  awk -v a="$accuracy" 'BEGIN { exit !(a >= 90) }' ||
    { echo "demo: accuracy below 90%" >&2; exit 1; }
fi

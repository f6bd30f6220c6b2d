#!/usr/bin/env bash
# Accelerator::prepare of a type it cannot take fails to compile with a sentence saying what to
# do: builds prepare_wrong_type.cc (a target outside `all`) and expects its three sentences.
#   prepare_wrong_type.sh BUILD_DIR
set -uo pipefail
if out=$(cmake --build "$1" --target prepare_wrong_type 2>&1); then
  echo "prepare_wrong_type.cc compiled; it must not" >&2
  exit 1
fi
status=0
for sentence in \
  "prepare() cannot shard torch::data::make_data_loader's loader: its dataset and sampler are private to it" \
  "prepare() takes a torch::data dataset inside an acc::DataLoader, which gives it a batch size" \
  "prepare() takes a model (a ModuleHolder or std::shared_ptr<torch::nn::Module>), an optimizer"; do
  if ! grep -qF "$sentence" <<<"$out"; then
    echo "missing from the compiler's output: $sentence" >&2
    status=1
  fi
done
[ "$status" = 0 ] || echo "$out"
echo "prepare_wrong_type.cc: $(grep -c 'error:' <<<"$out") error lines"
exit "$status"

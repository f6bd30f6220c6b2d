#!/usr/bin/env bash
# Builds acc-launch and libacc against the LibTorch inside python3's PyTorch (a CUDA wheel) and
# runs what only a GPU machine can: the CUDA tests of tests/runtime (NCCL group, DDP steps in fp32,
# bf16 and fp16 with the scaler), the Gloo runtime tests against that LibTorch, PyTorch 2.x's
# Python TCPStore client against our store, and the Fashion-MNIST example on the GPU.
#   scripts/gpu-check.sh [OUT_DIR]
# DEPS_DEBS=DIR: Debian .deb files of the build dependencies (CLI11, yaml-cpp, spdlog, fmt, Boost,
# GoogleTest) to unpack into a private prefix, for machines without them and without a registry.
# DATA_DIR: the Fashion-MNIST idx files (/usr/share/datasets/fashion-mnist).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/acc-gpu-check}}
mkdir -p "$out"
build=${BUILD_DIR:-build-gpu}
python=${PYTHON:-python3}
step() { echo; echo "== $*"; }
status=0
# logged NAME CMD...: runs CMD into $out/NAME.log; prints the log's lines matching $show (or its
# tail), and marks the check failed when CMD fails.
logged() {
  local name=$1
  shift
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  if [ -n "${show:-}" ]; then grep -E "$show" "$out/$name.log" | tail -40; else tail -5 "$out/$name.log"; fi
  [ $rc -eq 0 ] || { echo "!! $name failed (exit $rc): $*"; status=1; }
}

step machine
nvidia-smi -L; head -2 /etc/os-release; g++ --version | head -1; cmake --version | head -1
"$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
  "nccl", torch.cuda.nccl.version(), "cxx11 abi", torch.compiled_with_cxx11_abi())'

prefix_path=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
if [ -n "${DEPS_DEBS:-}" ]; then
  step "unpacking $DEPS_DEBS into /tmp/acc-deps"
  for deb in "$DEPS_DEBS"/*.deb; do dpkg -x "$deb" /tmp/acc-deps; done
  prefix_path="$prefix_path;/tmp/acc-deps/usr"
  export BOOST_ROOT=/tmp/acc-deps/usr
fi

step configure
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix_path" \
  -DCUDAToolkit_ROOT=/usr/local/cuda -DTORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}" \
  -DACC_TORCH_PYTHON="$(command -v "$python")" 2>&1 | tee "$out/configure.log" | grep -v '^--' || true
grep -q "libacc: CUDA 1, NCCL 1" "$out/configure.log" ||
  { echo "!! libacc was not configured with CUDA and NCCL"; tail -40 "$out/configure.log"; exit 1; }

step build
logged build cmake --build "$build" -j"$(nproc)" --target acc-launch runtime_worker runtime_tests \
  fashion_mnist store_test_server rendezvous_torch_tests ddp_step -- -k 0
grep -E -A5 'error:' "$out/build.log" | head -60

# A wheel's LibTorch has no gloo headers: there the runtime is built without Gloo, and only the
# tests that need no CPU process group run (the others get a clear BackendError).
filter='*'
if ! find "$("$python" -c 'import torch, os; print(os.path.dirname(torch.__file__))')/include" \
    -path '*gloo/algorithm.h' | grep -q .; then
  filter='*Cuda*:CollectivesTest.AWorldOfOne*:MixedPrecisionTest.*:BatchSampler*:WorkerEnv*'
  step "a CPU job of 2 ranks without Gloo: one clear error"
  "$build/launcher/acc-launch" --nproc_per_node 2 --cpu "$build/tests/runtime/runtime_worker" \
    collectives 2>&1 | grep -E 'Error|error|exit' | head -4
fi

step "runtime tests ($filter)"
show='^\[ *(OK|FAILED|SKIPPED|PASSED) |cuda .* ok|check failed|rror' logged runtime_tests \
  stdbuf -oL "$build/tests/runtime/runtime_tests" --gtest_filter="$filter"

step "PyTorch's own C++ TCPStore client (this LibTorch) against our store"
show='^\[ *(FAILED|PASSED) ' logged torch_cpp_client "$build/tests/rendezvous/rendezvous_torch_tests"

step "PyTorch's Python TCPStore client against our store"
logged torch_python_client "$python" tests/rendezvous/torch_python_client_test.py \
  "$build/tests/rendezvous/store_test_server"

step "PyTorch's DDP script under acc-launch: its 2.x workers use our store (Gloo, 2 ranks)"
logged python_ddp "$build/launcher/acc-launch" --nproc_per_node 2 --python "$python" \
  examples/python/ddp_train.py --steps 20

step "HuggingFace Accelerate's Accelerator under acc-launch and under accelerate launch"
show='accelerate launch:|acc-launch:|PASS|FAIL|SKIP' logged accelerate_state \
  bash tests/integration/accelerate/same_state_as_accelerate_launch.sh "$build/launcher/acc-launch" \
  "$python"

step "two ranks on one GPU: NCCL refuses them, the launcher must say so and stop cleanly"
if [ "$(nvidia-smi -L | wc -l)" -eq 1 ]; then
  "$build/launcher/acc-launch" --nproc_per_node 2 "$build/tests/runtime/runtime_worker" cuda no \
    >"$out/two_ranks_one_gpu.log" 2>&1
  echo "exit $?"; grep -v '^\s*$' "$out/two_ranks_one_gpu.log" | tail -15
fi

step "DDP step of BasicNet on the GPU: C++ libacc against PyTorch's Python DDP (NCCL, batch 64)"
show='ddp_step:' logged ddp_step env DEVICE=cuda NPROC="$(nvidia-smi -L | wc -l)" BATCH=64 \
  PYTHON="$python" bash bench/ddp_step/run.sh "$build"

data=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
if [ -d "$data" ]; then
  for precision in no bf16; do
    step "Fashion-MNIST on the GPU, mixed precision $precision"
    show='training|accuracy|rror|FAILED|exit' logged "fashion_mnist_$precision" \
      "$build/launcher/acc-launch" --nproc_per_node 1 --mixed_precision "$precision" \
      "$build/examples/fashion_mnist/fashion_mnist" --epochs "${EPOCHS:-1}" --data-dir "$data" \
      --checkpoint-dir "/tmp/acc-gpu-check-$precision"
  done
fi
exit $status

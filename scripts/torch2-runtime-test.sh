#!/usr/bin/env bash
# libacc built against the LibTorch inside PyTorch 2.x's wheel (scripts/install-python-peers.sh),
# and its tests that need no CPU process group run: a LibTorch API change shows in `make test`,
# not first on a GPU machine. The wheel's LibTorch ships no gloo headers, so that build has no
# CPU backend (multi-process CPU jobs get a clear BackendError); its CUDA and NCCL paths compile
# (against /usr/local/cuda) and their tests skip without a GPU.
#   scripts/torch2-runtime-test.sh [BUILD_DIR] [PYTHON]   (default build-torch2-test: an -O0 tree,
#   not the optimised build-torch2 that bench/store/run.sh makes)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-torch2-test}
python=${2:-$(bash scripts/install-python-peers.sh --python)}
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "torch2-runtime-test: $python cannot import torch (run scripts/install-python-peers.sh)" >&2
  exit 1
fi
prefix_path=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
version=$("$python" -c 'import torch; print(torch.__version__)')
echo "torch2-runtime-test: libacc against LibTorch $version ($prefix_path)"
# -O0 without debug information: this build checks that libacc compiles and its one-process
# tests pass on that LibTorch; it is never run for speed, and LibTorch 2.x's headers take a third
# less time to compile so.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 \
  -DACC_FULL_DEBUG_INFO=ON -DCMAKE_PREFIX_PATH="$prefix_path" -DCUDAToolkit_ROOT=/usr/local/cuda \
  -DTORCH_CUDA_ARCH_LIST=9.0 -DACC_WERROR="${WERROR:-OFF}" -DACC_TORCH2_PYTHON="$python" \
  ${CMAKE_FLAGS:-} >"$build.configure.log" 2>&1 || { tail -30 "$build.configure.log"; exit 1; }
grep -E '^-- libacc:' "$build.configure.log"
# Every source of the runtime, acc::launch with the launcher's libraries it links and the
# acc-launch the package installs, and the tests that need no launcher.
cmake --build "$build" -j"$(nproc)" --target acc_runtime runtime_unit_tests acc_runtime_launch \
  acc-launch
"$build/tests/runtime/runtime_unit_tests" --gtest_brief=1
# The installed package as a user of the wheel's LibTorch gets it: the install test's consumer
# (find_package(acc-launch), acc::launch_all) built with that LibTorch's CMake prefix, and run with
# one process, what that LibTorch allows on the CPU (no Gloo in the wheel).
echo "torch2-runtime-test: the installed package's consumer against LibTorch $version"
bash tests/runtime/install_test.sh "$build" tests/runtime/install_consumer "$prefix_path" 1

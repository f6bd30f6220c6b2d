#!/usr/bin/env bash
# Every path of acc-launch and libacc that needs a GPU, in one run that ends with one line per
# check: NAME, PASS/FAIL/SKIP, a figure where it has one. Meant for a lent GPU machine (no package
# registry there: nothing is installed). Each check is bounded by `timeout`; the bounds are set so
# the run fits well under 8 minutes on one GPU (on an H200 with 16 CPUs, prebuilt: 241 s, and
# 321 s with torchrun 2.11 as the launch bench's peer). GPU_CHECK_DEADLINE_S (default 450) caps
# the whole run: a check gets no more than the time left, and one that would start with under
# 10 s left is SKIP ("no time left"). Each summary line is also appended to OUT_DIR/summary.txt
# as it is known.
#
#   scripts/gpu-check.sh [OUT_DIR]            (default /tmp/acc-gpu-check; each check's log there)
#   GPU_CHECK_CPU=1 scripts/gpu-check.sh      what needs no GPU, on this machine's build; SKIP for
#                                             the rest (a check of the script itself)
#
# WHEEL: the wheel (`make wheel`) whose acc-launch the launch checks run, installed here with pip
#   from the file (below); without it they run the build's.
# PYTHON: a Python with PyTorch 2.x (a CUDA wheel on the GPU machine), torchfrtrace and Accelerate
#   beside it (python3). Its LibTorch is the one libacc builds against in GPU mode.
# BUILD_DIR: the build tree (build-gpu; with GPU_CHECK_CPU=1: build, already configured).
# GPU_CHECK_PREBUILT=1: BUILD_DIR already holds the programs, built elsewhere against the same
#   PyTorch (its libraries found through LD_LIBRARY_PATH): no configure, no build.
# DATA_DIR: the Fashion-MNIST idx files (/usr/share/datasets/fashion-mnist); where absent, a small
#   random set in that format is made for the Trainer's check (its accuracy then means nothing).
# DEPS_DEBS=DIR: Debian .deb files of the build dependencies (CLI11, yaml-cpp, spdlog, fmt, Boost,
#   GoogleTest) to unpack into a private prefix, for machines without them.
# Exit status: 0 when no check failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD
out=${1:-${OUT:-/tmp/acc-gpu-check}}
mkdir -p "$out"
cpu_only=${GPU_CHECK_CPU:-0}
python=${PYTHON:-python3}
if [ "$cpu_only" = 1 ]; then build=${BUILD_DIR:-build}; else build=${BUILD_DIR:-build-gpu}; fi
launcher="$build/launcher/acc-launch"
pybin=$(dirname "$(command -v "$python" || echo "$python")")
summary=()
deadline=$((SECONDS + ${GPU_CHECK_DEADLINE_S:-450}))
: >"$out/summary.txt"

# record NAME STATUS FIGURE: one line of the summary.
record() {
  summary+=("$(printf '%-26s %-4s %s' "$1" "$2" "$3")")
  printf '%s\n' "${summary[-1]}" >>"$out/summary.txt"
  echo "-- $1: $2 $3"
}
skip() { record "$1" SKIP "$2"; }
# check NAME SECONDS CMD...: runs CMD bounded by `timeout` into $out/NAME.log. Exit 0 is PASS,
# 77 SKIP, anything else FAIL (124: the bound). The figure is figure_NAME's output on the log
# (a function defined below), else the time taken.
check() {
  local name=$1 seconds=$2
  shift 2
  if [ $((deadline - SECONDS)) -lt 10 ]; then
    skip "$name" "no time left (GPU_CHECK_DEADLINE_S)"
    return
  fi
  [ $((deadline - SECONDS)) -lt "$seconds" ] && seconds=$((deadline - SECONDS))
  echo "== $name: $*"
  local began=$SECONDS
  # Through bash: CMD may be one of the functions below (exported with the variables they use).
  timeout --kill-after=10 "$seconds" bash -c '"$@"' bash "$@" >"$out/$name.log" 2>&1
  local rc=$? figure
  figure="$((SECONDS - began)) s"
  if declare -F "figure_$name" >/dev/null; then figure="$("figure_$name" "$out/$name.log") ($figure)"; fi
  case $rc in
    0) record "$name" PASS "$figure" ;;
    77) record "$name" SKIP "$(grep -m1 -i 'skip' "$out/$name.log")" ;;
    124 | 137) record "$name" FAIL "timed out after $seconds s; $out/$name.log"; tail -20 "$out/$name.log" ;;
    *) record "$name" FAIL "exit $rc; $out/$name.log"; tail -20 "$out/$name.log" ;;
  esac
}
# gtest CMD...: a GoogleTest binary whose tests all skipped counts as SKIP (exit 77), not PASS.
gtest() {
  local text rc
  text=$("$@" 2>&1)
  rc=$?
  echo "$text"
  if [ $rc -eq 0 ] && grep -q '^\[  SKIPPED \]' <<<"$text" &&
    grep -q '^\[  PASSED  \] 0 tests' <<<"$text"; then
    echo "SKIP: every test skipped"
    return 77
  fi
  return $rc
}
export -f gtest
export out launcher python pybin
gpu_only() { # gpu_only NAME: SKIP the check in CPU mode; true (0) then.
  [ "$cpu_only" = 1 ] && { skip "$1" "needs a GPU (GPU_CHECK_CPU=1)"; return 0; }
  return 1
}

# ---- the machine and the build ------------------------------------------------------------------
echo "== machine"
{
  nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
  echo "$(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $(cmake --version | head -1);" \
    "$(c++ --version | head -1); ninja $(ninja --version 2>/dev/null)"
  # Where a launch's run directory goes (docs/launch.md: /dev/shm when it is a tmpfs with room
  # and no TMPDIR is set, else the temporary directory): a disk there costs start-up time.
  echo "TMPDIR=${TMPDIR:-unset}; /dev/shm: $(df -h --output=fstype,avail /dev/shm 2>/dev/null |
    tail -1 || echo none); /tmp: $(df -h --output=fstype,avail /tmp 2>/dev/null | tail -1)"
} | tee "$out/machine.log"
"$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
  "gpus", torch.cuda.device_count())' 2>&1 | tee -a "$out/machine.log"
# The build dependencies from .debs, for a build here and for the prebuilt programs' spdlog and fmt.
if [ -n "${DEPS_DEBS:-}" ]; then
  for deb in "$DEPS_DEBS"/*.deb; do dpkg -x "$deb" /tmp/acc-deps; done
  # A development link that points at an absolute path (libz.so -> /lib/.../libz.so.1.2.13)
  # is pointed at the unpacked file, else at the machine's own library of that name.
  find /tmp/acc-deps -xtype l | while read -r link; do
    target=$(readlink "$link")
    case $target in /*) ;; *) continue ;; esac
    for candidate in "/tmp/acc-deps$target" "/tmp/acc-deps/usr$target" \
      $(ls -d "/usr/lib/x86_64-linux-gnu/$(basename "$link")".* \
        "/lib/x86_64-linux-gnu/$(basename "$link")".* 2>/dev/null); do
      [ -e "$candidate" ] && { ln -sf "$candidate" "$link"; break; }
    done
  done
  export BOOST_ROOT=/tmp/acc-deps/usr
fi
if [ "${GPU_CHECK_PREBUILT:-0}" = 1 ]; then
  # BUILD_DIR holds programs built elsewhere against the same PyTorch (its LibTorch found at run
  # time through LD_LIBRARY_PATH): no configure, no build.
  record build PASS "prebuilt: $build"
else
  if [ "$cpu_only" != 1 ]; then
    prefix_path=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
    [ -n "${DEPS_DEBS:-}" ] && prefix_path="$prefix_path;/tmp/acc-deps/usr"
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix_path" \
      -DCUDAToolkit_ROOT=/usr/local/cuda -DTORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}" \
      -DACC_TORCH_PYTHON="$(command -v "$python")" -DACC_TORCH2_PYTHON="$(command -v "$python")" \
      >"$out/configure.log" 2>&1
    if ! grep -q "libacc: CUDA 1, NCCL 1" "$out/configure.log"; then
      record configure FAIL "libacc was not configured with CUDA and NCCL; $out/configure.log"
      tail -30 "$out/configure.log"
      printf '%s\n' "${summary[@]}"
      exit 1
    fi
  fi
  began=$SECONDS
  if timeout $((deadline - SECONDS)) cmake --build "$build" -j"$(nproc)" --target acc-launch \
    runtime_worker runtime_tests launch_program trainer_worker fashion_mnist_trainer \
    store_test_server rendezvous_torch_tests ddp_step store_bench spawn_floor -- -k 0 \
    >"$out/build.log" 2>&1; then
    record build PASS "$((SECONDS - began)) s"
  else
    record build FAIL "$out/build.log"
    grep -E -A5 'error:' "$out/build.log" | head -40
  fi
fi

# ---- the wheel ----------------------------------------------------------------------------------
# WHEEL=FILE (dist/acc_launch-*.whl from `make wheel`, carried here): pip installs it from the file
# alone (--no-index: no registry here) beside $PYTHON's packages, into a prefix of this run, as a
# PyTorch user gets it, and every launch below runs that acc-launch instead of the build's
# (libacc's programs stay the build's). The figure is what the installed command says it is.
if [ -n "${WHEEL:-}" ]; then
  rm -rf "$out/wheel"
  wheel_install() {
    "$python" -m pip install --quiet --no-index --no-deps --disable-pip-version-check \
      --prefix "$out/wheel" "$WHEEL" || return 1
    # PREFIX/bin (PREFIX/local/bin with a Debian python): the native binary itself, no shim.
    local installed
    installed=$(find "$out/wheel" -path '*/bin/acc-launch' -type f | head -1)
    [ -n "$installed" ] && [ "$(head -c 4 "$installed" | od -An -c | tr -d ' ')" = '177ELF' ] ||
      { echo "no ELF binary bin/acc-launch under $out/wheel"; return 1; }
    "$installed" --version
  }
  export -f wheel_install
  export WHEEL
  figure_wheel_install() { echo "$(grep -m1 "^acc-launch " "$1") from $(basename "$WHEEL")"; }
  check wheel_install 120 wheel_install
  installed=$(find "$out/wheel" -path '*/bin/acc-launch' -type f 2>/dev/null | head -1)
  [ -n "$installed" ] && launcher=$installed
else
  skip wheel_install "no WHEEL=dist/acc_launch-*.whl given"
fi

# ---- libacc on the GPU --------------------------------------------------------------------------
# Among them CudaCheckpointTest: a rank killed mid-epoch under acc-launch, its save_state (CUDA
# RNG states included) loaded back from the node's memory, the launcher's written copy loaded by
# one process without acc-launch, bit for bit as an uninterrupted run.
figure_cuda_runtime_tests() { grep -E '^\[ *(PASSED|FAILED) ' "$1" | tr -s ' ' | paste -sd' '; }
gpu_only cuda_runtime_tests ||
  check cuda_runtime_tests 240 gtest "$build/tests/runtime/runtime_tests" --gtest_filter='*Cuda*'

# acc::launch refuses a call made after CUDA was initialised in the caller.
figure_launch_cuda_refusal() { grep -m1 -o 'acc::launch: CUDA was initialised[^;]*' "$1"; }
gpu_only launch_cuda_refusal ||
  check launch_cuda_refusal 60 gtest "$build/tests/runtime/runtime_tests" \
    --gtest_filter='LaunchTest.ACallAfterCudaWasInitialisedIsRefused'

# acc::Trainer for one epoch (its logging step reduces the loss: NCCL has no CPU tensors). On the
# CPU it runs over Gloo, 2 processes, a slice of the data.
data=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
if [ ! -f "$data/train-labels-idx1-ubyte.gz" ] && [ ! -f "$data/train-labels-idx1-ubyte" ]; then
  data="$out/fake-fashion-mnist"
  "$python" - "$data" <<'PY'
import gzip, os, random, struct, sys
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
for split, n in (("train", 6000), ("t10k", 1000)):
    labels = bytes(random.randrange(10) for _ in range(n))
    with gzip.open(f"{d}/{split}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 2049, n) + labels)
    with gzip.open(f"{d}/{split}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 28, 28) +
                bytes(min(255, 25 * l + random.randrange(30)) for l in labels for _ in range(784)))
PY
fi
figure_trainer_one_epoch() { grep -o "final test accuracy: [0-9.]*" "$1" | tail -1; }
if [ "$cpu_only" = 1 ]; then
  check trainer_one_epoch 300 "$launcher" --nproc_per_node 2 --cpu \
    "$build/examples/fashion_mnist/fashion_mnist_trainer" --epochs 1 --limit 3000 \
    --data-dir "$data" --output-dir "$out/trainer"
else
  check trainer_one_epoch 150 "$launcher" --nproc_per_node 1 \
    "$build/examples/fashion_mnist/fashion_mnist_trainer" --epochs 1 --data-dir "$data" \
    --output-dir "$out/trainer"
fi

# ---- GPU health (docs/launch.md, "GPU health") ----------------------------------------------------
# Over the real NVML: a healthy GPU starts the job and prints nothing; the debug log shows that
# NVML was asked.
gpu_health_check() {
  local err rc
  err=$("$launcher" --nproc_per_node 1 --no_python /bin/true 2>&1 >/dev/null)
  rc=$?
  [ $rc -eq 0 ] && [ -z "$err" ] || { echo "expected exit 0 and nothing printed: exit $rc, $err"; return 1; }
  "$launcher" --log_level debug --nproc_per_node 1 --no_python /bin/true 2>&1 | grep -m1 'GPU health:' ||
    { echo "NVML was not asked (no 'GPU health:' debug line)"; return 1; }
}
export -f gpu_health_check
figure_gpu_health_preflight() { grep -m1 -o 'GPU health: .*' "$1"; }
gpu_only gpu_health_preflight || check gpu_health_preflight 60 gpu_health_check

# ---- hangs on the GPU ---------------------------------------------------------------------------
# A 1-rank NCCL job that hangs after its collectives (two ranks cannot share one GPU under NCCL):
# the stall watch, with the default --stall_action stop, pokes the Flight Recorder's pipe, waits
# for the dump, stops the job (exit 4), and PyTorch's analyzer reads the dump.
fr_check() {
  "$launcher" --nproc_per_node 1 --stall_timeout 5 --stall_init_timeout 120 \
    --log_dir "$out/fr_logs" --python "$python" tests/integration/pytorch/nccl_sleep_after_collectives.py
  local rc=$?
  [ $rc -eq 4 ] || { echo "expected exit 4 (a hang), got $rc"; return 1; }
  local dir
  dir=$(find "$out/fr_logs" -type d -name flight_recorder | head -1)
  if [ -z "$dir" ] || [ ! -s "$dir/flight_recorder_rank_0" ]; then
    echo "no dump gathered"
    return 1
  fi
  echo "dump: $(stat -c %s "$dir/flight_recorder_rank_0") bytes in $dir"
  "$pybin/torchfrtrace" "$dir" --prefix flight_recorder_rank_ -j || return 1
}
export -f fr_check
figure_flight_recorder_dump() {
  echo "$(grep -m1 -o 'dump: [0-9]* bytes' "$1"), $(grep -ci 'deprecated' "$1") \"deprecated\" lines"
}
gpu_only flight_recorder_dump || { rm -rf "$out/fr_logs"; check flight_recorder_dump 180 fr_check; }

# A rank busy on its GPU with its CPU asleep, for longer than --stall_timeout: no hang, the job
# finishes.
figure_gpu_busy_cpu_asleep() { grep -m1 -o 'done: .* on the GPU' "$1"; }
gpu_only gpu_busy_cpu_asleep ||
  check gpu_busy_cpu_asleep 120 "$launcher" --nproc_per_node 1 --stall_timeout 4 \
    --python "$python" tests/integration/pytorch/gpu_busy_cpu_asleep.py 12

# --status_port on a rank busy on its GPU: /api/job shows its GPU busy share (NVML, the status
# server's own client), above 0 at some look while the kernels run.
status_gpu_check() {
  local err=$out/status_gpu.err best=0
  "$launcher" --nproc_per_node 1 --status_port 0 --python "$python" \
    tests/integration/pytorch/gpu_busy_cpu_asleep.py 10 >/dev/null 2>"$err" &
  local job=$! url="" n
  for n in $(seq 100); do
    url=$(grep -m1 -o 'http://[^ ]*/' "$err") && break
    sleep 0.1
  done
  [ -n "$url" ] || { echo "no status URL printed"; kill $job; return 1; }
  # Python's own client: the GPU machine may have no curl.
  best=$("$python" - "${url}api/job" <<'PY'
import json, sys, time, urllib.request
best = 0.0
for _ in range(30):
    time.sleep(0.5)
    try:
        rank = json.load(urllib.request.urlopen(sys.argv[1], timeout=2))["ranks"][0]
        best = max(best, rank.get("gpu_busy") or 0)
    except (OSError, ValueError, KeyError, IndexError):
        pass
print(best)
PY
)
  wait $job
  echo "gpu_busy max $best"
  "$python" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$best"
}
export -f status_gpu_check
figure_status_gpu_busy() { grep -m1 -o 'gpu_busy max [0-9.]*' "$1"; }
gpu_only status_gpu_busy || check status_gpu_busy 90 status_gpu_check

# Warm workers (docs/goodput.md): a 1-rank NCCL DDP job fails twice, each time once its standby is
# ready; attempt 0 runs in a standby handed its worker at once, the restarts in the heirs each
# attempt's worker forked before its script began (torch imported, CUDA untouched), and each
# steps on the GPU.
warm_cuda_check() {
  local port=29619
  WARM_METRICS=http://127.0.0.1:$port/metrics "$launcher" --nproc_per_node 1 --max_restarts 2 \
    --status_port $port --python "$python" tests/integration/pytorch/warm_cuda_restart.py
}
export -f warm_cuda_check
figure_warm_cuda_restart() { grep -o 'attempt=[12] .*' "$1" | tr -s ' ' | paste -sd ';'; }
gpu_only warm_cuda_restart || check warm_cuda_restart 120 warm_cuda_check

# acc_launch.checkpoint with CUDA tensors: saved every step, the rank SIGKILLed after step 3, the
# restart loads step 3 onto the GPU from the launcher's memory; then plain dcp.load reads step 6.
cuda_checkpoint_check() {
  local work
  work=$(mktemp -d)
  "$launcher" --nproc_per_node 1 --max_restarts 1 --python "$python" \
    tests/integration/pytorch/cuda_checkpoint.py "$work/ckpt" "$work" &&
    env -u PYTHONPATH "$python" -c '
import sys, torch, torch.distributed.checkpoint as dcp
state = {"step": 0}
dcp.load(state, checkpoint_id=sys.argv[1])
assert "acc_launch" not in sys.modules and state["step"] == 6, state
print("plain dcp.load: step", state["step"])' "$work/ckpt"
  local status=$?
  rm -rf "$work"
  return $status
}
export -f cuda_checkpoint_check
figure_cuda_checkpoint() { grep -o 'attempt=1 loaded .*' "$1" | tr -s ' ' | head -1; }
gpu_only cuda_checkpoint || check cuda_checkpoint 120 cuda_checkpoint_check

# acc_launch.checkpoint's page-locked slot in one process: a CUDA tensor saved, changed, loaded
# back on the GPU (tests/python/test_checkpoint.py's CUDA test, skipped there without a GPU).
cuda_page_locked_check() {
  local text rc
  text=$(cd tests/python && PYTHONPATH=../../python "$python" -m unittest -v \
    test_checkpoint.MemoryTest.test_cuda_tensors_are_copied_into_a_page_locked_slot_and_load_back_on_the_gpu 2>&1)
  rc=$?
  echo "$text"
  grep -q "skipped 'no CUDA device'" <<<"$text" && return 77
  return $rc
}
export -f cuda_page_locked_check
figure_cuda_page_locked() { grep -m1 -o '\.\.\. [a-z]*' "$1" | sed 's/^\.\.\. /a CUDA tensor through a page-locked slot: /'; }
gpu_only cuda_page_locked || check cuda_page_locked 60 cuda_page_locked_check

# DDP's gradient all_reduces on NCCL counted in the rank's time in collectives (`top`'s % coll),
# from DDP's own CUDA timing at the iterations PyTorch samples.
figure_ddp_cuda_share() { grep -m1 -o 'ddp_all_reduce records .*' "$1"; }
gpu_only ddp_cuda_share ||
  check ddp_cuda_share 120 "$launcher" --nproc_per_node 1 --python "$python" \
    tests/integration/pytorch/ddp_cuda_share.py

# No "... is deprecated" line from PyTorch about the launcher's variables, in any NCCL job above.
if [ "$cpu_only" = 1 ]; then
  check no_deprecated_names 120 bash tests/integration/pytorch/no_deprecated_names.sh \
    "$launcher" "$(command -v "$python")"
else
  figure_no_deprecated_names() { grep -c . "$1" | sed 's/$/ lines/'; }
  check no_deprecated_names 10 bash -c "! grep -i 'deprecated' '$out/flight_recorder_dump.log' \
    '$out/gpu_busy_cpu_asleep.log' '$out/trainer_one_epoch.log' '$out/cuda_runtime_tests.log'"
fi

# ---- PyTorch 2.x's clients and Accelerate ---------------------------------------------------------
check torch_python_tcpstore 120 "$python" tests/rendezvous/torch_python_client_test.py \
  "$build/tests/rendezvous/store_test_server"
figure_torch_cpp_tcpstore() { grep -E '^\[ *(PASSED|FAILED) ' "$1" | tr -s ' ' | paste -sd' '; }
gpu_only torch_cpp_tcpstore ||
  check torch_cpp_tcpstore 120 gtest "$build/tests/rendezvous/rendezvous_torch_tests"
figure_accelerate_state() { grep -E 'PASS|FAIL' "$1" | tail -1; }
check accelerate_state 300 bash tests/integration/accelerate/same_state_as_accelerate_launch.sh \
  "$launcher" "$python"

# ---- the benches, each bounded --------------------------------------------------------------------
figure_bench_launch_overhead() { grep -E 'start-up|teardown' "$1" | tr -s ' ' | paste -sd';'; }
# Its peers: the torchrun of $python (PyTorch 2.x), and Debian's 1.13 (mended for Python 3.11 by
# ../shared/peers/torchrun_debian.py) where the machine has it; a missing peer is one line.
check bench_launch_overhead 240 "$python" bench/launch_overhead/bench.py "$launcher" --runs 3 \
  --floor "$build/bench/launch_overhead/spawn_floor" --torch2-python "$(command -v "$python")" \
  --torchrun1 "$(realpath -m "$root/../shared/peers/torchrun_debian.py")"
# Where acc-launch's own start-up goes on this host (issue 23: 2.2x the bare spawn on the 16-CPU
# H200 host against 1.3-1.5x on the 2-core VM), each step's median time since main(); the GPU
# health pre-flight off, as in the bare-spawn comparison.
figure_launch_timeline() { sed -n 2,3p "$1" | tr -s ' ' | paste -sd';'; }
check launch_timeline 60 env ACC_NVML_LIBRARY=/none "$python" bench/launch_overhead/timeline.py \
  "$launcher" --runs 20
figure_bench_store() { grep -E 'cpu/op' "$1" | sed 's/ (.*//' | tr -s ' ' | paste -sd';'; }
if [ "$cpu_only" = 1 ]; then
  check bench_store 180 bash bench/store/run.sh "$build" --seconds 2 --rounds 1
else
  # The GPU tree is itself the 2.x tree, built already (run.sh would configure one where absent).
  check bench_store 180 "$build/bench/store/store_bench" --seconds 2 --rounds 1
fi
figure_bench_ddp_step() { grep -E 'ratio|floor/' "$1" | sed 's/^ddp_step: //' | paste -sd';'; }
if [ "$cpu_only" = 1 ]; then
  # The build's LibTorch is Debian's 1.13: its Python DDP is run.sh's own PYTHON (/usr/bin/python3),
  # and $python's 2.x the second row (PYTHON2).
  check bench_ddp_step 300 env ROUNDS=1 STEPS=30 PYTHON2="$python" bash bench/ddp_step/run.sh "$build"
else
  # PYTHON is PyTorch 2.x already: no second 2.x row (PYTHON2).
  check bench_ddp_step 300 env DEVICE=cuda NPROC="$(nvidia-smi -L | wc -l)" BATCH=64 ROUNDS=2 \
    PYTHON2= PYTHON="$python" bash bench/ddp_step/run.sh "$build"
fi

echo
echo "== summary ($(date -u +%FT%TZ), $(nvidia-smi -L 2>/dev/null | head -1 || echo no GPU); logs in $out)"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
! printf '%s\n' "${summary[@]}" | grep -q ' FAIL '

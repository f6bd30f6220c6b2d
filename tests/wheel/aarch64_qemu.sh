#!/usr/bin/env bash
# The aarch64 wheel (`make wheel ARCH=aarch64`, cross-built on x86-64) as far as an x86-64 machine
# can prove it, its binary run under qemu-user:
#   1. its name carries manylinux_2_N_aarch64 with N <= 34, it is at most 10 MB, and `auditwheel
#      show` (PyPI's, from the peers' environment) reports that tag or an older one; given an
#      x86-64 acc-launch, the two wheels hold the same files, byte for byte but for the binary,
#      the tag and RECORD;
#   2. its acc-launch is an AArch64 ELF, stripped, needing nothing of glibc newer than GLIBC_2.34
#      (readelf -V) and no library beyond libc, libm, libgcc_s and the loader;
#   3. under qemu-aarch64-static with the arm64 C library (QEMU_LD_PREFIX=/usr/aarch64-linux-gnu),
#      through binfmt_misc where it is or can be registered (then the workers are arm64 too:
#      dash from scripts/install-cross-aarch64.sh's root, and acc-launch itself), else by running
#      qemu on the launcher alone (its workers are the machine's own /bin/sh):
#      `--version`; a 2-worker job, with the one line that says what qemu-user refuses
#      (PR_SET_CHILD_SUBREAPER and a CLONE_VM process: launcher/src/process/real_os.cc); the
#      watchdog, a fork under qemu, kills a worker's child once the launcher is SIGKILLed;
#      `config default` into a fresh HOME and `env` that reads it back and names aarch64; with
#      Debian's python3-torch, a torch.distributed job through the launcher's store, whose
#      io_uring qemu-user refuses (it sends one reply at a time then).
# Skips (exit 77) with one line where qemu-aarch64-static or the arm64 C library is missing.
# Registering binfmt_misc (root only) stays after the test, as binfmt-support leaves it.
# Usage: aarch64_qemu.sh AARCH64_ACC_LAUNCH [PEERS_PYTHON] [X86_64_ACC_LAUNCH]
set -euo pipefail
launcher=$(realpath "$1")
peers_python=${2:-}
x86_launcher=${3:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
version=$(cat "$root/VERSION")
work=$(mktemp -d /tmp/acc-aarch64-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. The wheel.
source "$(dirname "$0")/wheel_check.sh"
check_wheel "$launcher" aarch64
if [ -n "$x86_launcher" ]; then
  x86_wheel=$(bash "$root/scripts/build-wheel.sh" "$x86_launcher" "$work/x86")
  /usr/bin/python3 - "$wheel" "$x86_wheel" <<'EOF' || fail "the aarch64 and x86-64 wheels differ"
import sys, zipfile
a, b = (zipfile.ZipFile(path) for path in sys.argv[1:])
names = a.namelist()
if names != b.namelist():
    sys.exit("members: %s against %s" % (names, b.namelist()))
own = ("/scripts/acc-launch", "/WHEEL", "/RECORD")
differ = [n for n in names if not n.endswith(own) and a.read(n) != b.read(n)]
wheel = [n for n in names if n.endswith("/WHEEL")][0]
if differ or a.read(wheel).replace(b"aarch64", b"x86_64") != b.read(wheel):
    sys.exit("members that differ: %s" % (differ or [wheel]))
EOF
  echo "PASS: the same files as the x86-64 wheel $(basename "$x86_wheel")"
fi

# 2. The binary the wheel holds.
/usr/bin/python3 - "$wheel" "$work/acc-launch" <<'EOF'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    name = [n for n in wheel.namelist() if n.endswith(".data/scripts/acc-launch")][0]
    with open(sys.argv[2], "wb") as out:
        out.write(wheel.read(name))
os.chmod(sys.argv[2], 0o755)
EOF
binary=$work/acc-launch
readelf -h "$binary" | grep -qE 'Machine:\s+AArch64' || fail "$binary is no AArch64 ELF"
readelf -S "$binary" | grep -q '\.debug_info\|\.symtab' && fail "$binary is not stripped"
versions=$(readelf -V "$binary")
too_new=$(grep -oE '\bGLIBC_2\.(3[5-9]|[4-9][0-9])\b' <<<"$versions" | sort -u || true)
[ -z "$too_new" ] || fail "$binary needs glibc symbols newer than GLIBC_2.34: $too_new"
newest=$(grep -oE '\bGLIBC_2\.[0-9]+\b' <<<"$versions" | sort -t. -k2,2n -u | tail -1)
needed=$(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
for library in $needed; do
  case "$library" in
    libc.so.6 | libm.so.6 | libgcc_s.so.1 | ld-linux-aarch64.so.1) ;;
    *) fail "$binary needs $library (only libc, libm and libgcc_s: $needed)" ;;
  esac
done
echo "PASS: a stripped AArch64 binary; newest glibc version it needs: $newest; loads $needed"

# 3. Under qemu-user.
qemu=$(command -v qemu-aarch64-static || true)
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
if [ -z "$qemu" ] || [ ! -e "$QEMU_LD_PREFIX/lib/ld-linux-aarch64.so.1" ]; then
  echo "SKIP: no qemu-aarch64-static or arm64 C library here (scripts/install-cross-aarch64.sh)"
  exit 77
fi
binfmt=/proc/sys/fs/binfmt_misc
registered() { grep -qx enabled "$binfmt/qemu-aarch64" 2>/dev/null; }
if ! registered && [ "$(id -u)" -eq 0 ]; then
  [ -e "$binfmt/register" ] || mount -t binfmt_misc binfmt_misc "$binfmt" 2>/dev/null || true
  if [ -e "$binfmt/qemu-aarch64" ]; then
    echo 1 >"$binfmt/qemu-aarch64" 2>/dev/null || true
  elif [ -e "$binfmt/register" ]; then
    update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
  fi
fi
arm64_sh=$(bash "$root/scripts/install-cross-aarch64.sh" --path)/bin/dash
if registered && "$binary" --version >/dev/null 2>&1; then
  run=()
  [ -x "$arm64_sh" ] || arm64_sh=/bin/sh
  interpreter=$(sed -n 's/^interpreter //p' "$binfmt/qemu-aarch64")
  echo "qemu: through binfmt_misc ($interpreter); workers: $arm64_sh, acc-launch"
else
  run=("$qemu")
  arm64_sh=""
  echo "qemu: $qemu on the launcher alone (binfmt_misc cannot be registered here); workers: /bin/sh"
fi

out=$("${run[@]}" "$binary" --version)
[ "$out" = "acc-launch $version" ] || fail "acc-launch --version under qemu: '$out'"
echo "PASS: --version under qemu: $out"

# What qemu-user 7.2 refuses (PR_SET_CHILD_SUBREAPER, a CLONE_VM process that is no thread), in
# the one line of launcher/src/process/real_os.cc.
refusal='^acc-launch: this system refuses .* (as qemu-user does): '
cd "$work"
worker_sh=${arm64_sh:-/bin/sh}
out=$("${run[@]}" "$binary" --nproc_per_node 2 --no_python "$worker_sh" -c 'echo rank $RANK' 2>&1) ||
  fail "the 2-worker job under qemu failed: $out"
grep -qx '\[rank0\]: rank 0' <<<"$out" && grep -qx '\[rank1\]: rank 1' <<<"$out" ||
  fail "the 2-worker job did not print ranks 0 and 1: $out"
[ "$(grep -c "$refusal" <<<"$out")" -eq 1 ] ||
  fail "the 2-worker job did not say in one line what qemu refuses: $out"
echo "PASS: 2 workers ($worker_sh) under qemu; the one line:"
grep "$refusal" <<<"$out"
if [ -n "$arm64_sh" ]; then
  out=$("$binary" --nproc_per_node 2 --no_python "$binary" --version 2>&1) ||
    fail "2 workers that are acc-launch --version failed: $out"
  [ "$(grep -cx "\[rank[01]\]: acc-launch $version" <<<"$out")" -eq 2 ] ||
    fail "2 workers that are acc-launch --version: $out"
  echo "PASS: 2 workers that are the aarch64 acc-launch itself (--version)"
fi

# The watchdog: SIGKILL the launcher; what its workers started dies with it.
mark=$((900000 + RANDOM))
"${run[@]}" "$binary" --nproc_per_node 2 --no_python /bin/sh -c "sleep $mark & wait" \
  >"$work/watchdog.log" 2>&1 &
job=$!
for _ in $(seq 100); do
  [ "$(pgrep -cx -f "sleep $mark" || true)" -eq 2 ] && break
  sleep 0.1
done
[ "$(pgrep -cx -f "sleep $mark" || true)" -eq 2 ] ||
  { kill -9 $job; fail "the workers' sleeps did not start: $(cat "$work/watchdog.log")"; }
kill -9 $job
wait $job 2>/dev/null || true
for _ in $(seq 100); do
  pgrep -x -f "sleep $mark" >/dev/null || break
  sleep 0.1
done
if left=$(pgrep -x -f "sleep $mark"); then
  kill $left || true
  fail "a worker's child outlived the SIGKILLed launcher under qemu (the watchdog)"
fi
echo "PASS: the launcher SIGKILLed under qemu, its forked watchdog ended what the workers started"

mkdir -p "$work/home"
config=$work/home/cfg.yaml
out=$(HOME=$work/home "${run[@]}" "$binary" config default --config_file "$config" 2>&1) ||
  fail "config default under qemu: $out"
grep -q '"num_processes"' "$config" || fail "config default wrote: $(cat "$config")"
out=$(HOME=$work/home "${run[@]}" "$binary" env --config_file "$config" 2>&1) ||
  fail "env under qemu: $out"
grep -q "^- \`acc-launch\` version: $version\$" <<<"$out" &&
  grep -q '^- Platform: Linux .* aarch64$' <<<"$out" &&
  grep -q "config passed: $config" <<<"$out" ||
  fail "env under qemu: $out"
echo "PASS: config default and env under qemu ($(grep '^- Platform' <<<"$out"))"

if timeout 60 /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
  out=$(timeout 120 "${run[@]}" "$binary" --nproc_per_node 2 --no_python /usr/bin/python3 -c '
import torch.distributed as d
d.init_process_group("gloo")
d.barrier()
print("joined", d.get_rank(), "of", d.get_world_size())' 2>&1) ||
    fail "a torch.distributed job under qemu: $out"
  grep -qx '\[rank0\]: joined 0 of 2' <<<"$out" && grep -qx '\[rank1\]: joined 1 of 2' <<<"$out" ||
    fail "a torch.distributed job under qemu: $out"
  echo "PASS: a torch.distributed job through the emulated launcher's store (qemu: no io_uring)"
else
  echo "torch: /usr/bin/python3 has no torch.distributed; the store job is not run"
fi

#!/usr/bin/env bash
# The wheel on a plain Debian 12 as a user there installs it: in a minimal bookworm root
# (scripts/install-debian12-root.sh: python3 and python3-venv, none of the build's packages), the
# wheel pip-installed into a venv, then, with nothing but that venv on the PATH before /usr/bin:
#   1. `acc-launch --version` says VERSION's, and `python -m acc_launch --version` too;
#   2. a 2-worker job runs (ranks 0 and 1 print);
#   3. a Python script that imports acc_launch and beats runs on 2 workers with --status_port, and
#      /api/job shows both ranks' steps (its beats) while it runs; it ends 0 and leaves nothing
#      in the root's /dev/shm;
#   4. `acc-launch config default` writes a config file that `acc-launch config show` reads;
#   5. `acc-launch env` reports this acc-launch and Python.
# Runs as root, chrooted, in a mount namespace (proc, sys, dev and a fresh /dev/shm mounted for the
# test alone, gone with it) and a network namespace of its own (fixed ports).
# Usage: debian12_root.sh ACC_LAUNCH. Exits 77 (skipped) without the root or without root rights.
set -uo pipefail
source "$(dirname "$0")/../integration/own_loopback.sh"
launcher=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
root=$(bash "$repo/scripts/install-debian12-root.sh" --path)
[ -x "$root/usr/bin/python3" ] ||
  { echo "SKIP: no Debian 12 root at $root (scripts/install-debian12-root.sh)"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: chroot needs root"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: no curl (scripts/install-deps.sh --test)"; exit 77; }
# The mounts are this test's alone: a mount namespace of its own, private, so they go with it.
if [ -z "${ACC_OWN_MOUNTS:-}" ]; then
  exec env ACC_OWN_MOUNTS=1 unshare --mount --propagation private bash "$0" "$@"
fi
version=$(cat "$repo/VERSION")
dir=$(mktemp -d "$root/tmp/acc-wheel-XXXXXX")
inside=/tmp/$(basename "$dir")  # the same directory, seen from the root
job=
cleanup() {
  [ -n "$job" ] && kill -9 "$job" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; tail -n 30 "$dir/job.err" 2>/dev/null; exit 1; }
within() {
  local seconds=$1
  shift
  for _ in $(seq $((seconds * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}

mount -t proc proc "$root/proc" && mount -t sysfs sysfs "$root/sys" &&
  mount --bind /dev "$root/dev" && mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm" ||
  fail "mounting proc, sys, dev and dev/shm in $root"
# A user's shell there: the venv's bin first, a home of its own, nothing of this machine's.
in_root() {
  chroot "$root" env -i HOME="$inside/home" PATH="$inside/venv/bin:/usr/local/bin:/usr/bin:/bin" \
    LANG=C.UTF-8 bash -c "cd $inside && $1"
}
mkdir -p "$dir/home"
python_version=$(in_root '/usr/bin/python3 --version') || fail "no python3 in $root"
for tool in cc g++ cmake; do
  in_root "command -v $tool" >/dev/null && fail "$root has $tool: not a root without the build's packages"
done
wheel=$(bash "$repo/scripts/build-wheel.sh" "$launcher" "$dir") || fail "the wheel"
in_root "python3 -m venv venv && venv/bin/pip install --quiet --no-index --disable-pip-version-check $(basename "$wheel")" ||
  fail "python3 -m venv; pip install $(basename "$wheel") in $root"
echo "PASS: $(basename "$wheel") pip-installed into a venv in Debian 12's $python_version root"

# 1. The version.
out=$(in_root 'acc-launch --version') && [ "$out" = "acc-launch $version" ] ||
  fail "acc-launch --version: '$out'"
out=$(in_root 'python -m acc_launch --version') && [ "$out" = "acc-launch $version" ] ||
  fail "python -m acc_launch --version: '$out'"
echo "PASS: acc-launch --version and python -m acc_launch --version: $out"

# 2. Two workers.
printf 'import os\nprint("worker", os.environ["RANK"], "of", os.environ["WORLD_SIZE"])\n' >"$dir/worker.py"
out=$(in_root 'acc-launch --nproc_per_node 2 worker.py' 2>&1) || fail "the 2-worker job: $out"
grep -q 'worker 0 of 2' <<<"$out" && grep -q 'worker 1 of 2' <<<"$out" ||
  fail "the 2-worker job did not print ranks 0 and 1: $out"
echo "PASS: a 2-worker job ran"

# 3. A script that imports acc_launch and beats, seen on --status_port.
cp "$here/beat_until_stop.py" "$dir/"
port=29660
in_root "acc-launch --nproc_per_node 2 --status_port $port beat_until_stop.py stop 100000" \
  >"$dir/job.out" 2>"$dir/job.err" &
job=$!
both_beating() {
  curl -sf "http://127.0.0.1:$port/api/job" >"$dir/job.json" &&
    python3 -c 'import json, sys
ranks = json.load(open(sys.argv[1]))["ranks"]
sys.exit(0 if len(ranks) == 2 and all(r["steps"] >= 5 for r in ranks) else 1)' "$dir/job.json"
}
within 60 both_beating || fail "/api/job never showed both ranks beating: $(cat "$dir/job.json" 2>/dev/null)"
seen=$(python3 -c 'import json, sys
print(", ".join("rank %d: %d steps" % (r["rank"], r["steps"]) for r in json.load(open(sys.argv[1]))["ranks"]))' "$dir/job.json")
touch "$dir/stop"
within 30 bash -c "! kill -0 $job 2>/dev/null" || fail "the beating job did not end"
wait "$job"
rc=$?
job=
[ $rc -eq 0 ] || fail "the beating job exited $rc"
grep -q 'rank 1 beat [0-9]* times' "$dir/job.out" || fail "no line of rank 1: $(cat "$dir/job.out")"
left=$(ls -A "$root/dev/shm")
[ -z "$left" ] || fail "the job left $left in /dev/shm"
echo "PASS: beats of the script seen on --status_port ($seen); it ended 0, /dev/shm empty"

# 4. config default, then config show reads it.
out=$(in_root 'acc-launch config default && acc-launch config show' 2>&1) ||
  fail "acc-launch config default; config show: $out"
config=$(find "$dir/home" -name default_config.yaml)
[ -n "$config" ] || fail "acc-launch config default wrote no default_config.yaml under HOME: $out"
grep -q 'num_processes' <<<"$out" || fail "config show printed no num_processes: $out"
echo "PASS: acc-launch config default wrote ${config#"$dir"/}; config show read it"

# 5. env.
out=$(in_root 'acc-launch env' 2>&1) || fail "acc-launch env: $out"
grep -q "acc-launch\` version: $version" <<<"$out" || fail "acc-launch env: $out"
echo "PASS: acc-launch env: $(tr '\n' ' ' <<<"$out" | cut -c1-200)"

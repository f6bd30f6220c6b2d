#!/usr/bin/env bash
# The wheel beside PyTorch 2.x and Accelerate (the peers' environment, scripts/
# install-python-peers.sh), as a PyTorch user installs it: a fresh venv that sees the peers'
# packages (a .pth file; the shared environment itself is left as it is), the wheel pip-installed
# into it. Under that venv's `acc-launch`, an unmodified 2-rank Gloo DDP script and an unmodified
# Accelerate script train, and the launcher's hook sees their collectives: /api/job on
# --status_port counts them for both ranks while they run. Both end 0 with their RESULT line.
# Runs in a network namespace of its own (../integration/own_loopback.sh): its ports are fixed.
# Usage: torch2_venv.sh ACC_LAUNCH PEERS_PYTHON. Exits 77 (skipped) where PEERS_PYTHON cannot
# import torch 2.x and accelerate.
set -uo pipefail
source "$(dirname "$0")/../integration/own_loopback.sh"
launcher=$(realpath "$1")
peers_python=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ -n "$peers_python" ] && "$peers_python" -c 'import torch, accelerate
assert torch.__version__.startswith("2.")' 2>/dev/null ||
  { echo "SKIP: '$peers_python' cannot import PyTorch 2.x and Accelerate"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: no curl (scripts/install-deps.sh --test)"; exit 77; }
work=$(mktemp -d /tmp/acc-wheel-torch2-XXXXXX)
job=
cleanup() {
  [ -n "$job" ] && kill -9 "$job" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; tail -n 30 "$work/job.err" 2>/dev/null; exit 1; }
within() {  # within SECONDS COMMAND...: until COMMAND succeeds
  local seconds=$1
  shift
  for _ in $(seq $((seconds * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}

wheel=$(bash "$root/scripts/build-wheel.sh" "$launcher" "$work/dist") || fail "the wheel"
"$peers_python" -m venv --without-pip "$work/venv" || fail "venv"
venv_python=$work/venv/bin/python
site=$("$venv_python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
"$peers_python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' >"$site/peers.pth"
"$peers_python" -m pip --python "$venv_python" install --quiet --no-index --no-deps \
  --disable-pip-version-check "$wheel" || fail "pip install $(basename "$wheel")"
[ "$(PATH="$work/venv/bin:$PATH" command -v acc-launch)" = "$work/venv/bin/acc-launch" ] ||
  fail "acc-launch on the PATH is not the venv's"
torch_version=$("$venv_python" -c 'import torch; print(torch.__version__)')
[[ $torch_version == 2.* ]] || fail "the venv's torch is $torch_version"
echo "PASS: $(basename "$wheel") installed beside torch $torch_version"

port=29650
both_in_collectives() {  # both ranks of /api/job have at least $1 collectives recorded
  curl -sf "http://127.0.0.1:$port/api/job" >"$work/job.json" &&
    "$venv_python" -c 'import json, sys
ranks = json.load(open(sys.argv[1]))["ranks"]
sys.exit(0 if len(ranks) == 2 and all(r["collectives"] >= int(sys.argv[2]) for r in ranks) else 1)' \
      "$work/job.json" "$1"
}

run() {  # run NAME SCRIPT LAUNCHER_FLAGS...: the script until it is stopped, seen by the hook
  local name=$1 script=$2
  shift 2
  rm -f "$work/stop"
  PATH="$work/venv/bin:$PATH" acc-launch --nproc_per_node 2 --python "$venv_python" \
    --status_port $port "$@" "$script" "$work/stop" 3000 >"$work/job.out" 2>"$work/job.err" &
  job=$!
  within 120 both_in_collectives 10 ||
    fail "$name: /api/job never showed both ranks' collectives: $(cat "$work/job.json" 2>/dev/null)"
  local seen
  seen=$("$venv_python" -c 'import json, sys
print(", ".join("rank %d: %d collectives" % (r["rank"], r["collectives"])
                for r in json.load(open(sys.argv[1]))["ranks"]))' "$work/job.json")
  touch "$work/stop"
  within 60 bash -c "! kill -0 $job 2>/dev/null" || fail "$name: the job did not end"
  wait "$job"
  local rc=$?
  job=
  [ $rc -eq 0 ] || fail "$name: the job exited $rc"
  local result
  result=$(sed -n 's/^\[rank0\]: RESULT/RESULT/p' "$work/job.out")
  [ -n "$result" ] || fail "$name: no RESULT line: $(cat "$work/job.out")"
  echo "PASS: $name under the wheel's acc-launch: $result; the hook saw $seen"
}
run "DDP (Gloo)" "$here/ddp_until_stop.py"
run "Accelerate" "$here/accelerate_until_stop.py" --cpu

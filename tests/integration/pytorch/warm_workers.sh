#!/usr/bin/env bash
# Warm workers as a user meets them (docs/goodput.md): a DDP script (warm_workers.py) whose last
# rank fails in attempts 0 and 1, under --nproc_per_node 2 --max_restarts 2.
#   1. By default, attempt 0's workers are standbys handed their workers at once (what their
#      import printed is on their stderr), and attempts 1 and 2's their heirs (forked by the last
#      attempt's workers before their scripts began): torch was imported before the script
#      began, and the script still runs as `python script.py ARGS` would (__main__, sys.argv,
#      sys.path[0], cwd, the command line ps shows), with its attempt's environment, the hook's
#      recorder and stack dump, every thread at the launcher's nice value, and the launcher as
#      its parent.
#   2. With --no_warm_workers every attempt starts cold.
#   3. As a user without privileges (root only; setpriv), the same as 1: the standby's lower CPU
#      priority is given back.
# The standbys import at nice 10 (ACC_WARM_WORKERS_NICE), not 19: still below the workers', but
# not starved by the nice-19 build `make test` runs beside the tests.
# Usage: warm_workers.sh ACC_LAUNCH PYTHON [RUNS] (default "warm cold unprivileged"). Exits 77
# (skipped) where PYTHON lacks torch.
set -uo pipefail
launcher=$(realpath "$1")
python=$2
runs=${3:-warm cold unprivileged}
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$python" ] || ! "$python" -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: $python cannot import torch.distributed"; exit 77
fi
source "$here/../own_loopback.sh"
work=$(mktemp -d /tmp/acc-warm-XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
cp "$here/warm_workers.py" "$work/"

# show_logs NAME: the launcher's last lines, then each standby's and worker's log (--log_dir).
show_logs() {
  echo "-- the launcher's stderr:"; tail -30 "$work/$1.err"
  find "$work/logs-$1" -name '*.log' -size +0 | sort | while read -r log; do
    echo "-- ${log#"$work/"}:"; tail -15 "$log"
  done
}

# run NAME WARM [COMMAND PREFIX...]: the job in $work, as the prefix runs it; then the checks.
run() {
  local name=$1 warm=$2
  shift 2
  # Warm: the failure waits until /metrics shows both standbys ready.
  local metrics=http://127.0.0.1:29613/metrics
  [ "$warm" = cold ] && metrics=
  mkdir -m 777 "$work/logs-$name"
  (cd "$work" && exec "$@" env WARM_METRICS=$metrics ACC_WARM_WORKERS_NICE=10 "$launcher" \
    --nproc_per_node 2 --max_restarts 2 --python "$python" --status_port 29613 \
    --monitor_interval 0.1 --log_dir "$work/logs-$name" \
    $([ "$warm" = cold ] && echo --no_warm_workers) \
    warm_workers.py x "y z" >"$work/$name.out" 2>"$work/$name.err") &
  local job=$! rc
  # A job that has not ended in 150 s (it takes 5-15) is shown as it stands, then stopped.
  for _ in $(seq 1500); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
  if kill -0 $job 2>/dev/null; then
    echo "FAIL: $name: the job has not ended after 150 s; its processes:"
    ps -o pid,ppid,pgid,ni,stat,wchan:24,etime,args --forest -p $job --ppid $job
    kill -USR2 $job; sleep 5; kill -TERM $job; sleep 5; kill -KILL $job 2>/dev/null
    wait $job; show_logs "$name"; exit 1
  fi
  wait $job; rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: $name: the job exited $rc"; show_logs "$name"; exit 1; }
  if "$python" - "$work/$name.out" "$warm" "$work" <<'PY'; then
import json, os, re, sys
out, warm, work = sys.argv[1], sys.argv[2] == "warm", sys.argv[3]
workers = [json.loads(line.split("WORKER ", 1)[1]) for line in open(out) if "WORKER " in line]
problems = []
if sorted((w["attempt"], w["rank"]) for w in workers) != [(a, r) for a in range(3) for r in range(2)]:
    problems.append("not one line per rank and attempt: %s" % [(w["attempt"], w["rank"]) for w in workers])
script = os.path.join(work, "warm_workers.py")
for w in workers:
    who = "attempt %d rank %d" % (w["attempt"], w["rank"])
    expected = {
        "preloaded": warm, "main": "__main__",
        "argv": ["warm_workers.py", "x", "y z"], "path0": os.path.realpath(work),
        "cwd": os.path.realpath(work), "standby_fd": False, "nice": [os.getpriority(os.PRIO_PROCESS, 0)],
        "recorded": True, "stack_file": True, "sum": 2.0, "world": 2,
    }
    for key, value in expected.items():
        if w[key] != value:
            problems.append("%s: %s is %r, not %r" % (who, key, w[key], value))
    if w["command"][-3:] != ["warm_workers.py", "x", "y z"]:
        problems.append("%s: its command line is %r" % (who, w["command"]))
    if "/attempt_%d/%d/" % (w["attempt"], w["rank"]) not in w["progress"]:
        problems.append("%s: its progress file is %s" % (who, w["progress"]))
# The launcher is every worker's parent, the heirs' too: it reaps them and sees how they end.
if len({w["ppid"] for w in workers}) != 1:
    problems.append("the workers have different parents: %s" % [w["ppid"] for w in workers])
# Attempt 0's workers imported torch as standbys: what the import printed (PYTHONPROFILEIMPORTTIME)
# is the worker's stderr, as a cold start's would be, not the standby's log.
if warm:
    err = open(out[:-len(".out")] + ".err").read()
    for rank in range(2):
        if not re.search(r"^\[rank%d\]:\s*import time:.*\|\s+torch\.distributed$" % rank, err, re.M):
            problems.append("rank %d's import of torch.distributed is not on its stderr" % rank)
for problem in problems:
    print("FAIL: " + problem)
for attempt in (1, 2):
    seconds = [w["seconds"] for w in workers if w["attempt"] == attempt]
    print("%s: attempt %d's workers past their first all_reduce %s s after their scripts began"
          % ("warm" if warm else "cold", attempt, seconds))
sys.exit(1 if problems else 0)
PY
    echo "PASS: $name"
  else
    show_logs "$name"; exit 1
  fi
}

for name in $runs; do
  case $name in
    warm) run warm warm env PYTHONPROFILEIMPORTTIME=1 ;;
    cold) run cold cold ;;
    unprivileged)
      if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
        mkdir "$work/home" && chown 65534:65534 "$work/home"
        run unprivileged warm setpriv --reuid=65534 --regid=65534 --clear-groups \
          env HOME="$work/home" TMPDIR="$work/home" PYTHONPROFILEIMPORTTIME=1
      else
        echo "SKIP: unprivileged (not root, or no setpriv)"
      fi ;;
  esac
done

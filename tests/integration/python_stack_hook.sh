#!/usr/bin/env bash
# The Python stack hook (an embedded sitecustomize.py first on the workers' PYTHONPATH) leaves the
# user's own sitecustomize running, and `acc-launch stacks` shows the worker's Python frames.
# No torch needed. Usage: python_stack_hook.sh ACC_LAUNCH
set -euo pipefail
launcher=$1
python=$(command -v python3) || { echo "SKIP: no python3"; exit 77; }
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$work/site"
echo 'print("user sitecustomize ran", flush=True)' > "$work/site/sitecustomize.py"
cat > "$work/wait_for_release.py" <<'PY'
import os, sys, time
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)  # the waiting line
PY
PYTHONPATH=$work/site "$launcher" --python "$python" "$work/wait_for_release.py" "$work/release" \
  > "$work/out" 2> "$work/err" &
pid=$!
for _ in $(seq 300); do
  grep -q ': ready$' "$work/out" && break
  kill -0 $pid 2>/dev/null || fail "the job ended early: $(cat "$work/err")"
  sleep 0.1
done
grep -q ': ready$' "$work/out" || fail "the worker did not start"
grep -q ': user sitecustomize ran$' "$work/out" || fail "the user's sitecustomize did not run"
"$launcher" stacks $pid > "$work/stacks" || fail "acc-launch stacks exited $?"
cat "$work/stacks"
grep -q 'wait_for_release.py", line 4 in <module>$' "$work/stacks" || fail "no Python frame"
touch "$work/release"
wait $pid || fail "the job exited $? after acc-launch stacks"
pid=
echo "PASS: the user's sitecustomize ran, stacks showed the Python frame, the job exited 0"

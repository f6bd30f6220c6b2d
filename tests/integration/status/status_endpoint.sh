#!/usr/bin/env bash
# The job's status as users watch it (--status_port): a 2-rank Gloo job that beats, where rank 1
# works three times longer per step.
#   1. /api/job has both ranks stepping; /metrics passes `promtool check metrics` and has
#      per-rank series (rank="1");
#   2. a real Prometheus, started here with a scrape config for the job, scrapes it, and its
#      query API returns rank 1's steps;
#   3. the page, loaded by headless Chromium, holds a row per rank once its script ran; a
#      screenshot is saved to SCREENSHOT;
#   4. `acc-launch top` under tmux shows both ranks and quits on q;
#   5. the job ends 0, and its port is closed and its URL file gone;
#   6. a job of two nodes (two launchers on this loopback): node 0 serves all four ranks, its
#      /metrics has node 1's (node="1", rank="3"), node 1 (its port from ACC_STATUS_PORT) serves
#      its own two;
#   7. a bad port or host is one line and exit 2, a port in use one line and exit 3, and no
#      worker starts;
#   8. beyond this host (a veth address): /metrics is open, the page and /api/job need the
#      token of the job's secret (curl with openssl's HMAC, and `top --job_secret_file`), and a
#      job without a secret refuses them there.
# Runs in a network namespace of its own (own_loopback.sh), so its ports are fixed.
# Usage: status_endpoint.sh ACC_LAUNCH SCREENSHOT. Exits 77 (skipped) without python3-torch,
# Prometheus, Chromium, tmux, curl or openssl.
set -uo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$(realpath "$1")
screenshot=$2
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
$python -c 'import torch.distributed' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }
for tool in prometheus promtool chromium tmux curl openssl; do
  command -v $tool >/dev/null || { echo "SKIP: no $tool (scripts/install-deps.sh --test)"; exit 77; }
done

status_port=29600 prometheus_port=29690
url=http://127.0.0.1:$status_port
work=$(mktemp -d /tmp/acc-status-XXXXXX)
tmux_socket=$work/tmux
pids=()
declare -A node_pid
cleanup() {
  tmux -S "$tmux_socket" kill-server 2>/dev/null
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  [ -n "${ACC_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; tail -n 20 "$work/job.err"; exit 1; }

# Waits up to $1 s for the command after it to succeed.
within() {
  local seconds=$1
  shift
  for _ in $(seq $((seconds * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}

PYTHON_EXEC=$python "$launcher" --nproc_per_node 2 --status_port $status_port --rdzv_id status-test \
  "$here/beating_job.py" "$work/stop" 1 0.15 100000 >"$work/job.out" 2>"$work/job.err" &
job=$!
pids+=($job)

# 1. The JSON and the metrics.
both_stepping() {
  curl -sf "$url/api/job" >"$work/job.json" &&
    $python -c 'import json, sys
job = json.load(open(sys.argv[1]))
ranks = job["ranks"]
sys.exit(0 if len(ranks) == 2 and all(r["steps"] >= 3 and r["step_seconds"] for r in ranks) else 1)' "$work/job.json"
}
within 60 both_stepping || fail "/api/job never showed two ranks stepping: $(cat "$work/job.json" 2>/dev/null)"
grep -q "^acc-launch: status of the job at $url/ " "$work/job.err" || fail "no line with the URL"
echo "PASS: /api/job: $(python3 -c 'import json, sys
job = json.load(open(sys.argv[1]))
print(", ".join("rank %d %s %d steps %.3f s/step" % (r["rank"], r["state"], r["steps"], r["step_seconds"]) for r in job["ranks"]))' "$work/job.json")"
curl -sf "$url/metrics" >"$work/metrics" || fail "no /metrics"
promtool check metrics <"$work/metrics" >"$work/promtool.out" 2>&1 || fail "promtool: $(cat "$work/promtool.out")"
grep -q '^acc_rank_steps_total{.*rank="1".*} [1-9]' "$work/metrics" || fail "no rank 1 steps in /metrics"
grep -q '^# TYPE acc_rank_step_seconds gauge$' "$work/metrics" || fail "no TYPE line for the step time"
echo "PASS: /metrics passes promtool check metrics ($(grep -c '^acc_' "$work/metrics") series, rank=\"1\" among them)"

# 2. A real Prometheus scrapes the job.
cat >"$work/prometheus.yml" <<CONFIG
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: acc-launch
    static_configs:
      - targets: ['127.0.0.1:$status_port']
CONFIG
prometheus --config.file "$work/prometheus.yml" --storage.tsdb.path "$work/tsdb" \
  --web.listen-address 127.0.0.1:$prometheus_port >"$work/prometheus.log" 2>&1 &
pids+=($!)
disown $!  # the cleanup kills it; no "Killed" notice from bash
query="$(printf 'http://127.0.0.1:%s/api/v1/query?query=acc_rank_steps_total%%7Brank%%3D%%221%%22%%7D' $prometheus_port)"
scraped() {
  curl -sf "$query" >"$work/query.json" && grep -q '"rank":"1"' "$work/query.json"
}
within 60 scraped || { tail -n 20 "$work/prometheus.log"; fail "Prometheus never returned rank 1's steps: $(cat "$work/query.json" 2>/dev/null)"; }
echo "PASS: Prometheus scraped the job: $(cut -c1-200 "$work/query.json")"

# 3. The page in headless Chromium, after its script has read /api/job.
chromium_run() {
  timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --user-data-dir="$work/chromium" --virtual-time-budget=4000 "$@" "$url/" 2>>"$work/chromium.log"
}
chromium_run --dump-dom >"$work/page.html"
grep -q 'id="rank-0"' "$work/page.html" && grep -q 'id="rank-1"' "$work/page.html" ||
  fail "the page has no row per rank: $(head -c 600 "$work/page.html"); $(tail -n 5 "$work/chromium.log")"
chromium_run --window-size=1300,420 --screenshot="$work/page.png" >/dev/null
[ -s "$work/page.png" ] || fail "Chromium saved no screenshot: $(tail -n 5 "$work/chromium.log")"
cp "$work/page.png" "$screenshot"
echo "PASS: the page in headless Chromium has rows rank-0 and rank-1; screenshot in $screenshot"

# 4. acc-launch top under tmux.
tmux -S "$tmux_socket" new-session -d -x 160 -y 30 "'$launcher' top; echo top-exited-\$?; sleep 30"
top_shows_ranks() {
  tmux -S "$tmux_socket" capture-pane -p >"$work/top.txt" 2>/dev/null &&
    grep -Eq '^ *0 .*running' "$work/top.txt" && grep -Eq '^ *1 .*running' "$work/top.txt"
}
within 20 top_shows_ranks || fail "top never showed both ranks running: $(cat "$work/top.txt")"
tmux -S "$tmux_socket" send-keys q
# Captured afresh at each try: a process substitution would be read once, before top had quit.
top_quit() { tmux -S "$tmux_socket" capture-pane -p | grep -q top-exited-0; }
within 10 top_quit ||
  fail "top did not quit on q: $(tmux -S "$tmux_socket" capture-pane -p)"
echo "PASS: acc-launch top under tmux showed both ranks and quit on q"

# 5. The job ends; its port closes.
touch "$work/stop"
within 60 bash -c "! kill -0 $job 2>/dev/null" || fail "the job did not end"
wait $job
rc=$?
[ $rc -eq 0 ] || fail "the job exited $rc"
curl -s -o /dev/null "$url/metrics" && fail "the port is still open after the job"
ls /tmp/acc-launch-status.$(id -u).$job.url >/dev/null 2>&1 && fail "the URL file is left"
echo "PASS: the job ended 0; its port is closed and its URL file gone"

# 6. Two nodes: node 0 shows the whole job.
# Node 1 takes its port from ACC_STATUS_PORT.
for node in 0 1; do
  port_flag=(--status_port 29610)
  [ $node -eq 1 ] && port_flag=()
  ACC_STATUS_PORT=29611 PYTHON_EXEC=$python "$launcher" --nnodes 2 --node_rank $node \
    --master_addr 127.0.0.1 --master_port 29500 --nproc_per_node 2 "${port_flag[@]}" --rdzv_id two-nodes \
    "$here/beating_job.py" "$work/stop2" 3 0.05 100000 >"$work/node$node.out" 2>"$work/node$node.err" &
  node_pid[$node]=$!
  pids+=($!)
done
every_node_stepping() {  # every_node_stepping PORT RANKS
  curl -sf "http://127.0.0.1:$1/api/job" >"$work/nodes.json" &&
    $python -c 'import json, sys
job = json.load(open(sys.argv[1]))
ranks = job["ranks"]
sys.exit(0 if [r["rank"] for r in ranks] == [int(x) for x in sys.argv[2].split(",")] and
         all(r["steps"] >= 3 for r in ranks) else 1)' "$work/nodes.json" "$2"
}
within 60 every_node_stepping 29610 0,1,2,3 ||
  { cat "$work/node1.err"; fail "node 0 never showed ranks 0-3 stepping: $(cat "$work/nodes.json" 2>/dev/null)"; }
curl -sf http://127.0.0.1:29610/metrics >"$work/metrics2" &&
  grep -q '^acc_rank_steps_total{job_id="two-nodes",node="1",host="[^"]*",rank="3",local_rank="1"} [1-9]' "$work/metrics2" &&
  grep -q '^acc_node_workers_alive{job_id="two-nodes",node="1",.*} 2$' "$work/metrics2" ||
  fail "node 0's /metrics has no series of node 1: $(grep -E 'steps_total|workers_alive' "$work/metrics2")"
promtool check metrics <"$work/metrics2" >"$work/promtool2.out" 2>&1 || fail "promtool: $(cat "$work/promtool2.out")"
every_node_stepping 29611 2,3 || fail "node 1 does not serve its own two ranks: $(cat "$work/nodes.json")"
touch "$work/stop2"
for node in 0 1; do
  wait ${node_pid[$node]}
  rc=$?
  [ $rc -eq 0 ] || { cat "$work/node$node.err"; fail "node $node exited $rc"; }
done
echo "PASS: two nodes: node 0 serves ranks 0-3 (node 1's as node=\"1\"), node 1 its own 2-3; both ended 0"

# 7. Bad input: one line each, and no worker.
refused() {  # refused EXPECTED_EXIT PATTERN ARGS...
  local expected=$1 pattern=$2
  shift 2
  "$launcher" --nproc_per_node 2 "$@" "$here/beating_job.py" "$work/stop" 1 0 1 >"$work/bad.out" 2>"$work/bad.err"
  local rc=$?
  [ $rc -eq "$expected" ] && [ "$(wc -l <"$work/bad.err")" -eq 1 ] && grep -q "$pattern" "$work/bad.err" ||
    fail "$* exited $rc, not $expected with one line matching '$pattern': $(cat "$work/bad.err")"
  echo "PASS: $* -> exit $rc: $(cat "$work/bad.err")"
}
refused 2 'status_port 70000' --status_port 70000
refused 2 'status_port' --status_port abc
refused 2 'not an address of this host' --status_host 203.0.113.9 --status_port 0
refused 3 'in use' --status_port $prometheus_port

# 8. Beyond this host (a veth address of this namespace: its clients are not loopback): /metrics
# is open; the page and /api/job need the token of the job's secret, as docs/observe.md shows it
# made with openssl, or `acc-launch top --job_secret_file`; without a job secret they are refused.
ip link add acc-v0 type veth peer name acc-v1 && ip addr add 10.9.0.1/24 dev acc-v0 &&
  ip link set acc-v0 up && ip link set acc-v1 up || fail "cannot make a veth pair"
outside=http://10.9.0.1:$status_port
code_of() { curl -s -o "$work/reply" -w '%{http_code}' "$@"; }
head -c 32 /dev/urandom | base64 >"$work/secret" && chmod 600 "$work/secret"
rm -f "$work/stop"
PYTHON_EXEC=$python "$launcher" --nproc_per_node 2 --status_host 0.0.0.0 --status_port $status_port \
  --rdzv_conf job_secret_file="$work/secret" "$here/beating_job.py" "$work/stop" 1 0.15 100000 \
  >"$work/job.out" 2>"$work/job.err" &
job=$!
pids+=($job)
within 60 curl -sf "$url/api/job" -o /dev/null || fail "the job with a secret never served /api/job"
grep -q "the page and /api/job beyond this host with the job's secret" "$work/job.err" ||
  fail "no line says who reads the status: $(grep status "$work/job.err")"
[ "$(code_of "$outside/metrics")" = 200 ] || fail "/metrics from beyond this host: not 200"
[ "$(code_of "$outside/api/job")" = 401 ] || fail "/api/job without the token: not 401"
grep -q 'Authorization: Bearer' "$work/reply" || fail "the 401 does not say what to send: $(cat "$work/reply")"
[ "$(code_of "$outside/")" = 401 ] || fail "the page without the token: not 401"
token=$(printf 'acc-launch status' | openssl dgst -sha256 -hmac "$(cat "$work/secret")" -r | cut -d' ' -f1)
[ "$(code_of -H "Authorization: Bearer $token" "$outside/api/job")" = 200 ] ||
  fail "/api/job with the token: not 200: $(cat "$work/reply")"
[ "$(code_of "$outside/?token=$token")" = 200 ] || fail "the page with ?token=: not 200"
[ "$(code_of -H "Authorization: Bearer x$token" "$outside/api/job")" = 401 ] || fail "a wrong token: not 401"
"$launcher" top --once --url "$outside/" --job_secret_file "$work/secret" >"$work/top.out" 2>&1 &&
  grep -q running "$work/top.out" || fail "top with the secret: $(cat "$work/top.out")"
"$launcher" top --once --url "$outside/" >"$work/top.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ "$(wc -l <"$work/top.out")" -eq 1 ] && grep -q "401 Unauthorized" "$work/top.out" ||
  fail "top without the secret exited $rc: $(cat "$work/top.out")"
echo "PASS: beyond this host: /metrics 200, /api/job and / 401 without the token, 200 with it; top: $(cat "$work/top.out")"
touch "$work/stop"
wait $job || fail "the job with a secret did not end 0"
rm -f "$work/stop"
PYTHON_EXEC=$python "$launcher" --nproc_per_node 2 --status_host 0.0.0.0 --status_port $status_port \
  "$here/beating_job.py" "$work/stop" 1 0.15 100000 >"$work/job.out" 2>"$work/job.err" &
job=$!
pids+=($job)
within 60 curl -sf "$url/api/job" -o /dev/null || fail "the job without a secret never served /api/job"
grep -q "the page and /api/job to this host alone: the job has no secret" "$work/job.err" ||
  fail "no line says who reads the status: $(grep status "$work/job.err")"
[ "$(code_of "$outside/api/job")" = 403 ] || fail "/api/job beyond this host without a job secret: not 403"
refusal=$(cat "$work/reply")
[ "$(code_of "$outside/metrics")" = 200 ] || fail "/metrics beyond this host without a job secret: not 200"
touch "$work/stop"
wait $job || fail "the job without a secret did not end 0"
echo "PASS: without a job secret: /api/job beyond this host 403 ($refusal), /metrics 200"

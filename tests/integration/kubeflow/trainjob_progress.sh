#!/usr/bin/env bash
# Kubeflow Trainer's TrainJob progress (docs/clusters.md, "Kubeflow Trainer progress"), against a
# stand-in for its status server (status_server.py: HTTPS with a certificate made here by openssl,
# every request logged), with the variables Kubeflow Trainer v2.2 gives its trainer pods:
#   1. a job of two nodes (two launchers on this loopback, one Python worker each, beating, with
#      their total steps): node 0 posts, with the token the file holds, the body of KEP-2779's
#      schema (trainerStatus: progressPercentage, estimatedRemainingSeconds, metrics of names and
#      values, lastUpdatedTime) to the URL's path; a post mid-job has 0 < percentage < 100 and a
#      time remaining; the token file rewritten mid-job is read at the next post; node 1 (whose
#      worker says another total) posts nothing; the last post says 100% and 0 s; both end 0;
#   2. a server that is down: the job ends 0, with exactly one line about it;
#   3. a server that refuses (HTTP 403), named by the KEP's first spelling
#      (KUBEFLOW_TRAINER_STATUS_*): one line naming the refusal, the job ends 0, the posts go on;
#   4. a CA that did not sign the server's certificate: one line naming the CA variable, exit 0.
# Runs in a network namespace of its own (own_loopback.sh), so its ports are fixed.
# Usage: trainjob_progress.sh ACC_LAUNCH. Exits 77 (skipped) without openssl or a network
# namespace.
set -uo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
command -v openssl >/dev/null || { echo "SKIP: no openssl"; exit 77; }

work=$(mktemp -d /tmp/acc-kubeflow-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  wait 2>/dev/null
  [ -n "${ACC_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.err "$work"/*.jsonl; do [ -f "$f" ] && { echo "--- $f"; tail -8 "$f"; }; done
  exit 1
}
cd "$work" || exit 1

# A CA, another nobody trusts, and the server's certificate for 127.0.0.1.
for name in ca other-ca; do
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$name" -keyout "$name.key" \
    -out "$name.crt" 2>/dev/null || fail "openssl could not make $name"
done
openssl req -newkey rsa:2048 -nodes -subj /CN=status -keyout server.key -out server.csr \
  2>/dev/null && printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext &&
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -extfile server.ext -out server.crt 2>/dev/null || fail "openssl could not make the server's"

# serve PORT MODE: the stand-in on PORT, its log in server-PORT.jsonl.
serve() {
  $python "$here/status_server.py" "$1" server.crt server.key "server-$1.jsonl" "ready-$1" "$2" \
    >"server-$1.err" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [ -f "ready-$1" ] && return 0; sleep 0.05; done
  fail "the status server on $1 did not start"
}
# Waits up to $1 s for the command after it to succeed.
within() {
  local seconds=$1
  shift
  for _ in $(seq $((seconds * 20))); do "$@" && return 0; sleep 0.05; done
  return 1
}
target=/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/mnist/status
export PYTHON_EXEC=$python ACC_KUBEFLOW_PROGRESS_INTERVAL=0.3

# 1. Two nodes; node 0 posts; the token rotates mid-job.
serve 28443 ok
printf 'token-one\n' >token
node() {  # NODE: one launcher of the two-node job, its output in nodeNODE.err
  KUBEFLOW_TRAINER_SERVER_URL=https://127.0.0.1:28443$target \
    KUBEFLOW_TRAINER_SERVER_CA_CERT=$work/ca.crt KUBEFLOW_TRAINER_SERVER_TOKEN=$work/token \
    timeout 60 "$launcher" --nnodes 2 --node_rank "$1" --master_addr 127.0.0.1 \
    --master_port 29500 --nproc_per_node 1 \
    "$here/beating_worker.py" 12 12 0.15 9 "$work/go" >"node$1.out" 2>"node$1.err"
}
node 0 & node0=$!
node 1 & node1=$!
pids+=($node0 $node1)
# A post of the first token with a percentage under 100 and a time remaining.
mid_job_post() {
  $python - server-28443.jsonl 2>/dev/null <<'CHECK'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    s = json.loads(r["body"]).get("trainerStatus", {})
    if (r["authorization"] == "Bearer token-one" and 0 < s.get("progressPercentage", 0) < 100
            and "estimatedRemainingSeconds" in s):
        sys.exit(0)
sys.exit(1)
CHECK
}
within 30 mid_job_post || fail "no post mid-job with the token, a percentage and a time remaining"
posts_before=$(wc -l <server-28443.jsonl)
printf 'token-two\n' >token.new && mv token.new token  # as the kubelet swaps the projected file
touch go
wait $node0; status0=$?
wait $node1; status1=$?
[ $status0 -eq 0 ] && [ $status1 -eq 0 ] || fail "the nodes exited $status0 and $status1"
$python - server-28443.jsonl "$target" "$posts_before" <<'CHECK' || fail "the posts"
import json, re, sys
log, target, before = sys.argv[1], sys.argv[2], int(sys.argv[3])
requests = [json.loads(line) for line in open(log)]
for r in requests:
    assert r["method"] == "POST" and r["path"] == target, r
    assert r["content_type"] == "application/json", r
    body = json.loads(r["body"])
    assert list(body) == ["trainerStatus"], body
    s = body["trainerStatus"]
    assert set(s) <= {"progressPercentage", "estimatedRemainingSeconds", "metrics",
                      "lastUpdatedTime"}, s
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", s["lastUpdatedTime"]), s
    if "progressPercentage" in s:
        assert type(s["progressPercentage"]) is int and 0 <= s["progressPercentage"] <= 100, s
    if "estimatedRemainingSeconds" in s:
        assert type(s["estimatedRemainingSeconds"]) is int and s["estimatedRemainingSeconds"] >= 0
    for m in s["metrics"]:
        assert set(m) == {"name", "value"} and all(type(v) is str and 1 <= len(v) <= 64
                                                   for v in m.values()), m
    metrics = {m["name"]: m["value"] for m in s["metrics"]}
    assert metrics["total_steps"] == "12", ("a post from node 1", metrics)
tokens = [r["authorization"] for r in requests]
assert tokens[:before] == ["Bearer token-one"] * before, tokens
assert "Bearer token-two" in tokens[before:], ("the rotated token was never sent", tokens)
assert tokens[-1] == "Bearer token-two", tokens
last = json.loads(requests[-1]["body"])["trainerStatus"]
assert last["progressPercentage"] == 100 and last["estimatedRemainingSeconds"] == 0, last
assert {m["name"]: m["value"] for m in last["metrics"]}["current_step"] == "12", last
print("PASS: %d posts by node 0 (%d with the first token), the last: %s" %
      (len(requests), before, json.dumps(last)))
CHECK
! grep -qi kubeflow node0.err node1.err || fail "a line about Kubeflow: $(grep -hi kubeflow node*.err)"

# one_job NAME ENVIRONMENT...: a one-node job of two workers with those variables; exit 0 and
# exactly one line about Kubeflow Trainer on its stderr, which is printed.
one_job() {
  local name=$1
  shift
  env "$@" timeout 60 "$launcher" --nproc_per_node 2 "$here/beating_worker.py" 6 6 0.15 0 go \
    >"$name.out" 2>"$name.err" || fail "$name: the job exited $?"
  local lines
  lines=$(grep -ci kubeflow "$name.err")
  [ "$lines" -eq 1 ] || fail "$name: $lines lines about Kubeflow, not 1"
  grep -i kubeflow "$name.err"
}

# 2. Nothing listens on the port.
one_job down KUBEFLOW_TRAINER_SERVER_URL=https://127.0.0.1:28444$target \
  KUBEFLOW_TRAINER_SERVER_CA_CERT="$work/ca.crt" KUBEFLOW_TRAINER_SERVER_TOKEN="$work/token"
grep -qi "warning: .*127.0.0.1:28444.*refused" down.err || fail "down: the line does not say why"
echo "PASS: a server that is down: exit 0, one line"

# 3. A server that refuses, named by the KEP's first spelling.
serve 28445 refuse
one_job refused KUBEFLOW_TRAINER_STATUS_URL=https://127.0.0.1:28445$target \
  KUBEFLOW_TRAINER_STATUS_CA_CERT="$work/ca.crt" KUBEFLOW_TRAINER_STATUS_TOKEN="$work/token"
grep -q "HTTP 403: Forbidden" refused.err || fail "refused: the line does not name the refusal"
refused_posts=$(grep -c '"Bearer token-two"' server-28445.jsonl)
[ "$refused_posts" -ge 2 ] || fail "refused: $refused_posts posts, not one and the last at least"
echo "PASS: a server that refuses (KUBEFLOW_TRAINER_STATUS_*): exit 0, one line, $refused_posts posts"

# 4. The wrong CA.
one_job wrong-ca KUBEFLOW_TRAINER_SERVER_URL=https://127.0.0.1:28443$target \
  KUBEFLOW_TRAINER_SERVER_CA_CERT="$work/other-ca.crt" KUBEFLOW_TRAINER_SERVER_TOKEN="$work/token"
grep -q "KUBEFLOW_TRAINER_SERVER_CA_CERT=$work/other-ca.crt" wrong-ca.err ||
  fail "wrong CA: the line does not name the CA file"
echo "PASS: a CA that did not sign the server's certificate: exit 0, one line"

#!/usr/bin/env bash
# The etcd rendezvous over TLS, as torchrun's etcd backend takes it (--rdzv_conf
# protocol=https,cacert=,cert=,key=), on a real etcd (Debian's etcd-server) that serves https only
# and demands client certificates (--client-cert-auth --trusted-ca-file); a CA, etcd's
# certificate (SAN IP:127.0.0.1) and a client certificate made here with openssl:
#   0. a dry run shows the member as https://;
#   1. two launchers (--nnodes 2, one shell worker each) meet through it: ranks 0 and 1 of 2;
#   2. without the client certificate, a launcher stops within 15 s, non-zero, with one line
#      naming the endpoint and the fix;
#   3. with another CA as cacert, the same;
#   4. an endpoint named localhost, which etcd's certificate does not name, the same;
#   5. a cacert that cannot be read: one line naming the file, exit 2, before any connection.
# etcd is killed and the temporary directory removed on every exit.
# Usage: etcd_tls.sh ACC_LAUNCH. Exits 77 (skipped) without etcd, openssl or a network namespace.
set -uo pipefail
source "$(dirname "$0")/../own_loopback.sh"
launcher=$(realpath "$1")
command -v etcd >/dev/null || { echo "SKIP: no etcd (Debian's etcd-server)"; exit 77; }
command -v openssl >/dev/null || { echo "SKIP: no openssl"; exit 77; }

work=$(mktemp -d /tmp/acc-etcd-tls-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  wait 2>/dev/null
  [ -n "${ACC_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "--- $f"; tail -5 "$f"; done; exit 1; }

# A CA (and a second one nobody trusts); etcd's certificate for 127.0.0.1; a client certificate.
cd "$work" || exit 1
ca() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$1" -keyout "$1.key" \
    -out "$1.crt" 2>/dev/null
}
signed() {  # NAME CA EXTENSIONS
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$1" -keyout "$1.key" -out "$1.csr" 2>/dev/null &&
    printf '%s\n' "$3" >"$1.ext" &&
    openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 2 \
      -extfile "$1.ext" -out "$1.crt" 2>/dev/null
}
ca ca && ca other-ca || fail "openssl could not make the CAs"
# clientAuth too: etcd 3.4's gateway calls its own gRPC with the server certificate.
signed server ca "subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth" || fail "openssl could not make etcd's certificate"
signed client ca "extendedKeyUsage=clientAuth" || fail "openssl could not make the client's"

endpoint=127.0.0.1:2379
etcd --name tls --data-dir "$work/etcd" --listen-client-urls "https://$endpoint" \
  --advertise-client-urls "https://$endpoint" --listen-peer-urls http://127.0.0.1:2380 \
  --initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster tls=http://127.0.0.1:2380 \
  --cert-file server.crt --key-file server.key --client-cert-auth --trusted-ca-file ca.crt \
  >etcd.log 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  grep -q "ready to serve client requests" etcd.log && break
  sleep 0.1
done
grep -q "ready to serve client requests" etcd.log || fail "etcd did not start"

worker="$work/worker.sh"
printf '#!/bin/sh\necho "rank $RANK of $WORLD_SIZE"\n' >"$worker"
chmod +x "$worker"
# launch NAME RDZV_CONF: one node of job ${NAME%-*}, its output in NAME.log.
launch() {
  timeout 30 "$launcher" --nnodes 2 --nproc_per_node 1 --rdzv_backend etcd \
    --rdzv_endpoint "${member:-$endpoint}" --rdzv_id "job-${1%-*}" --rdzv_conf "read_timeout=10,$2" \
    --no_python "$worker" >"$1.log" 2>&1
}
tls="protocol=https,cacert=$work/ca.crt,cert=$work/client.crt,key=$work/client.key"

# 0. A dry run shows the member as https, with the files.
"$launcher" --dry_run --nnodes 2 --rdzv_backend etcd --rdzv_endpoint "$endpoint" --rdzv_id dry \
  --rdzv_conf "$tls" --no_python "$worker" >dry.log 2>&1 || fail "the dry run exited $?"
grep -qF "# rendezvous: etcd at https://$endpoint, cacert $work/ca.crt" dry.log ||
  fail "the dry run does not show https: $(cat dry.log)"

# 1. Two nodes meet over TLS.
launch meet-a "$tls" &
a=$!
launch meet-b "$tls" &
b=$!
pids+=($a $b)
wait $a || fail "node a exited $?"
wait $b || fail "node b exited $?"
ranks=$(cat meet-a.log meet-b.log | grep -oE 'rank [0-9] of [0-9]' | sort | tr '\n' ,)
[ "$ranks" = "rank 0 of 2,rank 1 of 2," ] || fail "expected ranks 0 and 1 of 2, got: $ranks"
echo "PASS: two launchers meet through etcd over TLS with client certificates ($ranks)"

# refused NAME RDZV_CONF EXPECTED: one node stops within 15 s, non-zero, one line with EXPECTED.
refused() {
  local start=$SECONDS status
  launch "$1" "$2"
  status=$?
  [ $status -ne 0 ] && [ $status -ne 124 ] || fail "$1: exit $status, expected a refusal"
  [ $((SECONDS - start)) -le 15 ] || fail "$1: took $((SECONDS - start)) s"
  local lines
  lines=$(grep -v '^$' "$1.log")
  [ "$(wc -l <<<"$lines")" -eq 1 ] || fail "$1: expected one line, got: $lines"
  grep -qF -- "$3" <<<"$lines" || fail "$1: expected '$3' in: $lines"
  echo "PASS: $1: exit $status in $((SECONDS - start)) s: $lines"
}
# 2. No client certificate, 3. another CA, 4. an unreadable cacert.
refused no-cert "protocol=https,cacert=$work/ca.crt" "etcd at $endpoint"
grep -q "cert=PATH,key=PATH" no-cert.log || fail "no-cert: the line does not say to give cert="
refused wrong-ca "protocol=https,cacert=$work/other-ca.crt,cert=$work/client.crt,key=$work/client.key" \
  "cacert=$work/other-ca.crt"
# 4. A certificate that does not name the host as the endpoint gives it (IP:127.0.0.1 only).
member=localhost:2379 refused wrong-host "$tls" "(hostname mismatch)"
refused unreadable "protocol=https,cacert=$work/missing.crt" "cacert=$work/missing.crt"
# Nothing left running but etcd.
sleep 0.2
left=$(pgrep -f "$worker" || true)
[ -z "$left" ] || fail "workers left running: $left"
echo "PASS"

#!/usr/bin/env bash
# `acc-launch rendezvous serve`: prints its address, serves PyTorch-protocol bytes, stops on
# SIGTERM with 0; without --host it says in one line that it listens on every interface; a port
# in use gives one line naming host:port and exit 3; a bad flag exit 2.
# Usage: rendezvous_command_test.sh ACC_LAUNCH_BINARY
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi; }

"$bin" rendezvous serve --host 127.0.0.1 --port 0 >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 100); do grep -q listening "$work/out" && break; sleep 0.05; done
port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/out")
check "prints the address it listens on" '[ -n "$port" ]'
# A 1.13 ADD of 5 to "/n" on the raw socket; the reply is int64 5, little-endian.
reply=$(exec 3<>"/dev/tcp/127.0.0.1/$port" &&
  printf '\x03\x02\x00\x00\x00\x00\x00\x00\x00/n\x05\x00\x00\x00\x00\x00\x00\x00' >&3 &&
  timeout 5 head -c 8 <&3 | od -An -tx1 | tr -d ' \n')
check "serves the TCPStore protocol" '[ "$reply" = "0500000000000000" ]'

"$bin" rendezvous serve --host 127.0.0.1 --port "$port" >"$work/out2" 2>"$work/err2"
code=$?
check "a port in use exits 3" '[ $code -eq 3 ]'
check "naming host:port on one line" \
  'grep -q "127.0.0.1:$port is already in use" "$work/err2" && [ $(wc -l <"$work/err2") -eq 1 ]'

kill -TERM "$pid"
wait "$pid"
code=$?
check "SIGTERM stops it with 0" '[ $code -eq 0 ]'

# Without --host: every interface, as before, said in one line on stderr; with it, that one alone.
"$bin" rendezvous serve --port 0 >"$work/out4" 2>"$work/err4" &
pid=$!
for _ in $(seq 100); do grep -q listening "$work/out4" && break; sleep 0.05; done
check "no --host listens on every interface" 'grep -q "listening on 0.0.0.0:" "$work/out4"'
check "and says so in one line" \
  'grep -q "no --host: the store listens on every interface (0.0.0.0)" "$work/err4" &&
   [ $(wc -l <"$work/err4") -eq 1 ]'
check "--host says nothing of it" '! grep -q "every interface" "$work/err"'
kill -TERM "$pid"
wait "$pid"

"$bin" rendezvous serve --prot 1 >/dev/null 2>"$work/err3"
code=$?
check "a bad flag exits 2 naming the flag" '[ $code -eq 2 ] && grep -q -- "--prot" "$work/err3"'
exit $((failures > 0))

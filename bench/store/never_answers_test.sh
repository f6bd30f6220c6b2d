#!/usr/bin/env bash
# store_bench against a server that accepts and never answers (as a server that does not speak
# the clients' dialect looks to them): it must end within its bound, non-zero, with one line
# naming the server, instead of hanging. Usage: never_answers_test.sh STORE_BENCH
set -uo pipefail
bench=$1
start=$(date +%s)
err=$(mktemp)
trap 'rm -f "$err"' EXIT
timeout 45 "$bench" --seconds 0.2 --clients 2 --rounds 1 --yardsticks 0 --silent_server 1 \
  --timeout 3 >/dev/null 2>"$err"
rc=$?
took=$(($(date +%s) - start))
lines=$(grep -c "^store_bench: .*'silent'" "$err")
grep "^store_bench:" "$err"
echo "exit $rc after ${took} s"
# 124 from the bench's own watchdog (a 2.x client blocks in its PING at connect) or 1 (a 1.13
# client's receive timeout ends its get); never `timeout`'s kill, and one line about it.
if [ "$rc" -eq 0 ] || [ "$took" -ge 45 ] || [ "$lines" -ne 1 ]; then
  echo "FAIL: expected a non-zero exit within the bound and one line naming 'silent'"
  exit 1
fi

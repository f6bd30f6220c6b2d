#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzz build (tests/fuzz, -DACC_FUZZ=ON) for SECONDS each, from
# a copy of its checked-in corpus (tests/fuzz/corpus/<name>) in a temporary directory, so the
# corpus is never modified. A crash's input is kept as BUILD/fuzz-artifacts/<name>-crash-<sha1>:
# fix the parser, then add it to the corpus. Ends with one line,
#   fuzz: T targets, E execs, C crashes
# and exits non-zero when any target crashed (or leaked, timed out, ran out of memory).
# Usage: fuzz.sh BUILD SECONDS
set -uo pipefail
build=$1
seconds=$2
root=$(cd "$(dirname "$0")/.." && pwd)
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
targets=0 execs=0 crashes=0
for binary in "$build"/tests/fuzz/*_fuzz; do
  [ -x "$binary" ] || continue
  name=$(basename "$binary" _fuzz)
  mkdir -p "$work/$name"
  cp -r "$root/tests/fuzz/corpus/$name/." "$work/$name/" 2>/dev/null || true
  log="$build/fuzz-$name.log"
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb: one that allocates 2 GiB, a bug.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="$artifacts/$name-" "$work/$name" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  runs=${runs:-0}
  targets=$((targets + 1))
  execs=$((execs + runs))
  if [ $rc -ne 0 ]; then
    crashes=$((crashes + 1))
    echo "fuzz: $name: FAILED (exit $rc) after $runs execs; $log:"
    grep -m1 -E "ERROR: |runtime error|SUMMARY" "$log" || tail -5 "$log"
    ls "$artifacts" | grep "^$name-" | sed 's/^/  input: /'
  else
    echo "fuzz: $name: $runs execs in ${seconds}s"
  fi
done
echo "fuzz: $targets targets, $execs execs, $crashes crashes"
[ "$targets" -gt 0 ] && [ "$crashes" -eq 0 ]

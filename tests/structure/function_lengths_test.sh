#!/usr/bin/env bash
# function_lengths.sh over a made-up tree: a function of 81 lines is named and fails the check,
# one of 80 passes it, and an exempt table is listed as exempt.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/launcher/src" "$tree/tests/config"

# A function whose end line is `lines` after its first.
function_of() {
  echo "int $1() {"
  for ((i = 1; i < $2; ++i)); do echo "  f($i);"; done
  echo "}"
}

function_of fits 80 >"$tree/launcher/src/fits.cc"
function_of expectations 200 >"$tree/tests/config/real_configs_test.cc"
set +e
output="$(bash "$here/function_lengths.sh" "$tree" 2>&1)"
status=$?
set -e
[ $status -eq 0 ] || { echo "80 lines and a table: exit $status, not 0"; echo "$output"; exit 1; }
grep -q '^exempt: 200 expectations tests/config/real_configs_test.cc:1$' <<<"$output" ||
  { echo "the table is not listed as exempt:"; echo "$output"; exit 1; }

function_of too_long 81 >"$tree/launcher/src/too_long.cc"
set +e
output="$(bash "$here/function_lengths.sh" "$tree" 2>&1)"
status=$?
set -e
[ $status -eq 1 ] || { echo "81 lines: exit $status, not 1"; echo "$output"; exit 1; }
grep -q '^81 too_long launcher/src/too_long.cc:1$' <<<"$output" ||
  { echo "the 81-line function is not named:"; echo "$output"; exit 1; }
if grep -q 'fits' <<<"$output"; then echo "the 80-line function is named:"; echo "$output"; exit 1; fi
echo "ok"

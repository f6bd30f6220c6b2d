#!/usr/bin/env bash
# seam.sh fails on a tree with a direct call outside the seams (in a library, under an alias),
# names the line, and passes the same calls inside the seams: the check can fail.
set -euo pipefail
seam=$(dirname "$0")/seam.sh
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/{runtime/src,common/src,launcher/src/process}
echo 'auto left() { return deadline - SteadyClock::now(); }' >"$tree/runtime/src/late.cc"
echo 'bool alive(int pid) { return ::kill(pid, 0) == 0; }' >"$tree/runtime/src/alive.cc"
echo 'auto t = std::chrono::steady_clock::now();' >"$tree/common/src/clock.cc"
echo 'bool ok = ::kill(pid, 0) == 0;' >"$tree/launcher/src/process/real_os.cc"

fail() { echo "seam_test.sh: $*"; exit 1; }
for kind in clock process; do
  status=0
  out=$(bash "$seam" "$kind" "$tree") || status=$?
  ((status == 1)) || fail "$kind: exit $status on a tree with a call outside the seams: $out"
done
out=$(bash "$seam" clock "$tree" || true)
grep -q 'runtime/src/late.cc:1:' <<<"$out" || fail "clock: the aliased call is not named: $out"
grep -q 'common/src/clock.cc' <<<"$out" && fail "clock: the seam itself is named: $out"
out=$(bash "$seam" process "$tree" || true)
grep -q 'runtime/src/alive.cc:1:' <<<"$out" || fail "process: the library's kill is not named: $out"
grep -q 'real_os.cc' <<<"$out" && fail "process: the seam itself is named: $out"

rm "$tree/runtime/src/late.cc" "$tree/runtime/src/alive.cc"
bash "$seam" clock "$tree" >/dev/null || fail "clock: a tree with calls in the seams only fails"
bash "$seam" process "$tree" >/dev/null || fail "process: a tree with calls in the seams only fails"
echo "seam_test.sh: seam.sh names calls outside the seams and passes the seams"

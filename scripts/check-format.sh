#!/usr/bin/env bash
# Checks (or with --fix, applies) .clang-format on every C++ file git knows or would add (tracked,
# and untracked but not ignored: a new file is checked before its first commit).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.h' '*.cc' '*.cpp' '*.hpp' 2>/dev/null | sort -u || true)
[ ${#files[@]} -eq 0 ] && { echo "check-format: no C++ files"; exit 0; }
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! clang-format --dry-run --Werror "${files[@]}" 2>/tmp/acc-format.$$; then
  head -30 /tmp/acc-format.$$ >&2
  rm -f /tmp/acc-format.$$
  echo "check-format: files differ from .clang-format; run 'make format'" >&2
  exit 1
fi
rm -f /tmp/acc-format.$$
echo "check-format: ${#files[@]} files formatted"

#!/usr/bin/env bash
# Lists every C++ function longer than the limit in the tree's own sources (not build/), and exits
# 1 if any is not exempt below. A function's length is universal-ctags' end line less its first
# line (the signature's), as `ctags -x --_xformat='%{end} %{line}'` gives them.
#
#   tests/structure/function_lengths.sh [SOURCE_DIR] [LIMIT]
#
# Exit status: 0 none too long, 1 some (each printed as "LINES FUNCTION FILE:LINE"), 77 when
# universal-ctags is missing (ctest's skip; scripts/install-deps.sh --test installs it).
set -euo pipefail

root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
limit="${2:-80}"

# Data, not steps: a function that is one literal is as long as what it holds. "FILE FUNCTION".
exempt=(
  # The status page's HTML, style and script: one raw string literal.
  "launcher/src/status/status_page.cc status_page"
  # The table of bad inputs and the one clear line each must give.
  "tests/integration/bad_input_test.cc bad_inputs"
  # The table of real configuration files and what each must become.
  "tests/config/real_configs_test.cc expectations"
)

if ! ctags --version 2>/dev/null | grep -q 'Universal Ctags'; then
  echo "SKIP: universal-ctags is not installed (scripts/install-deps.sh --test)"
  exit 77
fi

cd "$root"
dirs=()
for d in common config rendezvous launcher runtime tests bench examples; do
  [ -d "$d" ] && dirs+=("$d")
done

offenders=0
while read -r lines name file line; do
  skip=0
  for e in "${exempt[@]}"; do
    if [ "$e" = "$file $name" ]; then skip=1; fi
  done
  if [ $skip -eq 1 ]; then
    echo "exempt: $lines $name $file:$line"
  else
    echo "$lines $name $file:$line"
    offenders=$((offenders + 1))
  fi
done < <(ctags -R --languages=C++ --kinds-C++=f --fields=+ne -x \
           --_xformat='%{end} %{line} %N %F' "${dirs[@]}" |
         awk -v limit="$limit" '($1 - $2) > limit { print $1 - $2, $3, $4, $2 }' | sort -k3,3 -k4n)

if [ $offenders -gt 0 ]; then
  echo "$offenders function(s) over $limit lines: split them into steps whose names say what" \
       "each does (or, for a data table, add it to the exemptions in $0)"
  exit 1
fi
echo "no function over $limit lines"

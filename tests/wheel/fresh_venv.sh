#!/usr/bin/env bash
# The wheel as a user gets it: built from the tree's acc-launch (scripts/build-wheel.sh, as
# `make wheel`), then installed with pip into a fresh virtual environment.
#   1. its name carries manylinux_2_N with N <= 34, it is at most 10 MB, and `auditwheel show`
#      (PyPI's, from the peers' environment) reports that tag or an older one;
#   2. the venv's `acc-launch` is the ELF binary itself, stripped, needing nothing newer than
#      GLIBC_2.34; `acc-launch --version` and `python -m acc_launch --version` say VERSION's;
#   3. it runs a 2-worker job (the venv's python), ranks 0 and 1 each print once;
#   4. `import acc_launch; acc_launch.beat()` and a section work with no launcher, from the
#      installed package, whose __version__ is VERSION's.
# Usage: fresh_venv.sh ACC_LAUNCH [PEERS_PYTHON]  (PEERS_PYTHON: the venv with auditwheel; the
# auditwheel check is skipped, and said so, where it has none).
set -euo pipefail
launcher=$(realpath "$1")
peers_python=${2:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
version=$(cat "$root/VERSION")
work=$(mktemp -d /tmp/acc-wheel-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. The wheel.
source "$(dirname "$0")/wheel_check.sh"
check_wheel "$launcher" x86_64

# 2. Installed into a fresh venv.
/usr/bin/python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --no-index --disable-pip-version-check "$wheel" ||
  fail "pip install $name"
installed=$work/venv/bin/acc-launch
[ "$(head -c 4 "$installed" | od -An -c | tr -d ' ')" = '177ELF' ] ||
  fail "$installed is not the ELF binary: $(head -c 80 "$installed")"
file_info=$(readelf -S "$installed")
grep -q '\.debug_info\|\.symtab' <<<"$file_info" && fail "$installed is not stripped"
bash "$root/tests/wheel/glibc_symbols.sh" "$installed"
"$installed" --version >"$work/version.out"
[ "$(cat "$work/version.out")" = "acc-launch $version" ] && [ "$(wc -l <"$work/version.out")" -eq 1 ] ||
  fail "acc-launch --version: '$(cat -A "$work/version.out")', not the one line 'acc-launch $version'"
out=$("$work/venv/bin/python" -m acc_launch --version)
[ "$out" = "acc-launch $version" ] || fail "python -m acc_launch --version: '$out'"
echo "PASS: the venv's acc-launch is the stripped ELF binary; both ways say 'acc-launch $version'"

# 3. A 2-worker job.
printf 'import os\nprint("worker", os.environ["RANK"], "of", os.environ["WORLD_SIZE"])\n' \
  >"$work/worker.py"
out=$(PATH="$work/venv/bin:$PATH" acc-launch --nproc_per_node 2 --python "$work/venv/bin/python" \
  "$work/worker.py" 2>&1) || fail "the 2-worker job failed: $out"
grep -q 'worker 0 of 2' <<<"$out" && grep -q 'worker 1 of 2' <<<"$out" ||
  fail "the 2-worker job did not print ranks 0 and 1: $out"
echo "PASS: the installed acc-launch ran 2 workers"

# 4. The package with no launcher.
out=$(cd "$work" && env -u ACC_PROGRESS_FILE "$work/venv/bin/python" -c '
import acc_launch
acc_launch.beat()
with acc_launch.section("checkpoint", timeout=5):
    acc_launch.beat()
print(acc_launch.__version__, acc_launch.__file__, sorted(acc_launch.__all__))') ||
  fail "import acc_launch; acc_launch.beat() without a launcher: $out"
read -r got_version got_file got_all <<<"$out"
[ "$got_version" = "$version" ] || fail "acc_launch.__version__ is $got_version"
[[ $got_file == "$work/venv/lib/"*/site-packages/acc_launch/__init__.py ]] ||
  fail "acc_launch imported from $got_file, not the venv"
echo "PASS: import acc_launch; beat() and section() with no launcher (from the venv's site-packages; API $got_all)"

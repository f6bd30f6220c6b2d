#!/usr/bin/env bash
# The sdist (scripts/build-sdist.sh, `make sdist`) as pip builds it:
#   1. it is acc_launch-VERSION.tar.gz, every member under acc_launch-VERSION/, with PKG-INFO, the
#      build's files and the Python package, and nothing of tests/, bench/, docs/, examples/,
#      runtime/, scripts/ or a build tree;
#   2. every file of the tree that building acc-launch read (the dependencies BUILD_DIR's ninja
#      recorded for the target's objects) is in it, and CMake configures the unpacked sdist with
#      the backend's options (each CMake file and source it names is there);
#   3. `twine check --strict` passes on it and on the wheel of BUILD_DIR's acc-launch
#      (PEERS_PYTHON's twine; not run, and said so, where it has none);
#   4. `pip wheel` of it with no C++ compiler on the PATH, then with CMake finding no package of
#      /usr (and dpkg lacking libyaml-cpp-dev), fails, and the last line of the build's output
#      names what is missing and the apt-get line that installs it.
# With --install (`make sdist-test`; not in ctest, the build from source takes minutes):
#   5. pip installs it into a fresh venv (--no-build-isolation --no-index: the backend needs
#      nothing but the standard library), building acc-launch in Release; the venv's acc-launch is
#      an ELF binary tagged with its glibc floor, says VERSION's and runs a 2-worker job. The
#      times of the install and of the job are printed.
# Usage: sdist.sh [--install] [BUILD_DIR [PEERS_PYTHON]]  (without BUILD_DIR, or where it is no
# ninja tree with acc-launch built, the checks of 2 and 3 that need it are not run, and said so)
set -euo pipefail
install=0
if [ "${1:-}" = --install ]; then
  install=1
  shift
fi
build=${1:-}
peers_python=${2:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
version=$(cat "$root/VERSION")
python=/usr/bin/python3
work=$(mktemp -d /tmp/acc-sdist-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# 1. The sdist and its files.
sdist=$(PYTHON=$python bash "$root/scripts/build-sdist.sh" "$work/dist")
name=$(basename "$sdist")
top=acc_launch-$version
[ "$name" = "$top.tar.gz" ] || fail "unexpected sdist name $name"
tar -tzf "$sdist" | sort >"$work/members"
outside=$(grep -v "^$top/" "$work/members" || true)
[ -z "$outside" ] || fail "members outside $top/: $outside"
sed "s|^$top/||" "$work/members" >"$work/files"
unwanted=$(grep -E '^(tests|bench|docs|examples|runtime|scripts|dist|build[^/]*)/' "$work/files" ||
  true)
unwanted+=$(grep -E '__pycache__|\.pyc$' "$work/files" || true)
[ -z "$unwanted" ] || fail "the sdist holds what no build of acc-launch needs: $unwanted"
for file in PKG-INFO pyproject.toml README.md VERSION CMakeLists.txt python/acc_build_backend.py \
  python/acc_launch/__init__.py launcher/src/main.cc; do
  grep -qxF "$file" "$work/files" || fail "the sdist has no $file"
done
echo "PASS: $name, $(($(stat -c %s "$sdist") / 1024)) KiB, $(wc -l <"$work/files") files," \
  "none of tests/ bench/ docs/ examples/ runtime/ scripts/ or a build tree"

# 2. What the build reads is in it; CMake configures it.
if [ -n "$build" ] && [ -f "$build/build.ninja" ] && [ -f "$build/launcher/acc-launch" ] &&
  objects=$(ninja -C "$build" -t inputs acc-launch 2>/dev/null | grep '\.o$'); then
  # shellcheck disable=SC2086  # one word per object
  ninja -C "$build" -t deps $objects >"$work/deps"
  read_files=$("$python" -c '
import os, sys
build, root, files = os.path.realpath(sys.argv[1]), os.path.realpath(sys.argv[2]), sys.argv[3]
held = set(open(files).read().split())
read = set()
for line in open(sys.argv[4]):
    if line.startswith("    "):
        path = os.path.realpath(os.path.join(build, line.strip()))
        ours = path.startswith(root + "/") and not path.startswith(build + "/")
        if ours and os.path.isfile(path):
            read.add(os.path.relpath(path, root))
missing = sorted(read - held)
print(len(read), " ".join(missing))' "$build" "$root" "$work/files" "$work/deps")
  read -r count missing <<<"$read_files" || true
  [ "$count" -gt 100 ] ||
    fail "only $count files of the tree in the dependencies of $build's acc-launch"
  [ -z "${missing:-}" ] || fail "building acc-launch reads what the sdist lacks: $missing"
  echo "PASS: the sdist holds all $count files of the tree that building acc-launch in $build read"
else
  echo "the build's dependencies: no ninja tree with acc-launch built at '${build}'; not checked"
fi
tar -xzf "$sdist" -C "$work"
unpacked=$work/$top
options=$("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import acc_build_backend
print(" ".join(acc_build_backend.CMAKE_OPTIONS))' "$unpacked/python")
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# shellcheck disable=SC2086  # one word per option
cmake -S "$unpacked" -B "$work/configured" "${generator[@]}" $options >"$work/configure.log" 2>&1 ||
  fail "CMake cannot configure the unpacked sdist ($options): $(tail -n 30 "$work/configure.log")"
echo "PASS: CMake configures the unpacked sdist with the backend's options ($options)"

# 3. twine check, the sdist's and the wheel's.
if [ -n "$peers_python" ] && "$peers_python" -c 'import twine' 2>/dev/null; then
  checked=("$sdist")
  if [ -n "$build" ] && [ -f "$build/launcher/acc-launch" ]; then
    checked+=("$(PYTHON=$python bash "$root/scripts/build-wheel.sh" "$build/launcher/acc-launch" \
      "$work/dist")")
  else
    echo "twine check of the wheel: no acc-launch in '${build}'; not run"
  fi
  "$peers_python" -m twine check --strict "${checked[@]}" >"$work/twine.txt" 2>&1 ||
    fail "twine check --strict: $(cat "$work/twine.txt")"
  passed=$(grep -c 'PASSED' "$work/twine.txt" || true)
  [ "$passed" -eq ${#checked[@]} ] || fail "twine check --strict: $(cat "$work/twine.txt")"
  echo "PASS: twine check --strict:" \
    "$(sed 's/\x1b\[[0-9;]*m//g' "$work/twine.txt" | tr -s '\n ' '  ')"
else
  echo "twine: not importable by '${peers_python}'; its check is not run"
fi

# 4. A missing build package: the last line of the build's output says which, and how to get it.
last_line_of_build() {  # last_line_of_build LOG: the backend's last line inside pip's error box
  grep -B1 '\[end of output\]' "$1" | head -n 1 | sed 's/^ *//'
}
pip_wheel() {  # pip_wheel LOG PATH: pip wheel of the sdist with that PATH, which must fail
  if env -u CXX PATH="$2" "$python" -m pip wheel --no-index --no-build-isolation --no-cache-dir \
    --disable-pip-version-check -w "$work/wheels" "$sdist" >"$1" 2>&1; then
    fail "pip wheel built the sdist where it should have failed: $(tail -n 20 "$1")"
  fi
}
cannot="acc-launch: cannot build from source: missing"
apt="on Debian or Ubuntu, as root: apt-get install"
mkdir "$work/no-compiler" "$work/no-packages"
for tool in cmake ninja strip objdump; do
  ln -s "$(command -v "$tool")" "$work/no-compiler/$tool"
done
pip_wheel "$work/no-compiler.log" "$work/no-compiler"
line=$(last_line_of_build "$work/no-compiler.log")
[ "$line" = "$cannot a C++ compiler (g++); $apt g++" ] ||
  fail "without a C++ compiler, the build's last line is '$line':" \
    "$(tail -n 20 "$work/no-compiler.log")"
echo "PASS: no C++ compiler: $line"
# CMake's configure as if /usr had no package (CMake stops at the first, CLI11), and dpkg as if
# libyaml-cpp-dev were not installed: the line names both.
cat >"$work/no-packages/cmake" <<EOF
#!/bin/sh
case " \$* " in *" -S "*) exec $(command -v cmake) "\$@" -DCMAKE_IGNORE_PREFIX_PATH=/usr ;; esac
exec $(command -v cmake) "\$@"
EOF
expected="$cannot CLI11 (libcli11-dev); $apt libcli11-dev"
if command -v dpkg-query >/dev/null; then
  cat >"$work/no-packages/dpkg-query" <<EOF
#!/bin/sh
$(command -v dpkg-query) "\$@" | grep -v "^libyaml-cpp-dev "
EOF
  expected="$cannot CLI11 (libcli11-dev), libyaml-cpp-dev; $apt libcli11-dev libyaml-cpp-dev"
fi
chmod +x "$work/no-packages/"*
pip_wheel "$work/no-packages.log" "$work/no-packages:$PATH"
line=$(last_line_of_build "$work/no-packages.log")
[ "$line" = "$expected" ] ||
  fail "with CMake finding no package, the build's last line is '$line':" \
    "$(tail -n 30 "$work/no-packages.log")"
echo "PASS: CMake finds no package: $line"

[ $install -eq 1 ] || exit 0

# 5. Installed from the sdist into a fresh venv, acc-launch built from source.
echo "pip install $name: building acc-launch from source (load: $(cut -d' ' -f1-3 /proc/loadavg))"
/usr/bin/python3 -m venv "$work/venv"
start=$(now)
"$work/venv/bin/python" -m pip install --no-index --no-build-isolation --no-cache-dir \
  --disable-pip-version-check "$sdist" >"$work/pip.log" 2>&1 ||
  fail "pip install $name: $(tail -n 40 "$work/pip.log")"
install_seconds=$(since "$start")
installed=$work/venv/bin/acc-launch
[ "$(head -c 4 "$installed" | od -An -c | tr -d ' ')" = '177ELF' ] ||
  fail "$installed is not the ELF binary: $(head -c 80 "$installed")"
wheel_file=$(echo "$work"/venv/lib/python*/site-packages/acc_launch-"$version".dist-info/WHEEL)
tag=$(sed -n 's/^Tag: //p' "$wheel_file")
newest=$(objdump -T "$installed" | grep -oE '\bGLIBC_2\.[0-9]+\b' | sort -t. -k2,2n -u | tail -1)
[ "$tag" = "py3-none-manylinux_2_${newest#GLIBC_2.}_$(uname -m)" ] ||
  fail "the wheel pip built is tagged $tag; its acc-launch needs $newest"
[ "$("$installed" --version)" = "acc-launch $version" ] ||
  fail "acc-launch --version: '$("$installed" --version)'"
echo "PASS: pip install $name built and installed acc-launch $version ($tag) in $install_seconds s"
printf 'import os\nprint("worker", os.environ["RANK"], "of", os.environ["WORLD_SIZE"])\n' \
  >"$work/worker.py"
start=$(now)
out=$(PATH="$work/venv/bin:$PATH" acc-launch --nproc_per_node 2 "$work/worker.py" 2>&1) ||
  fail "the 2-worker job failed: $out"
job_seconds=$(since "$start")
grep -q 'worker 0 of 2' <<<"$out" && grep -q 'worker 1 of 2' <<<"$out" ||
  fail "the 2-worker job did not print ranks 0 and 1: $out"
echo "PASS: the acc-launch built from the sdist ran 2 workers in $job_seconds s"

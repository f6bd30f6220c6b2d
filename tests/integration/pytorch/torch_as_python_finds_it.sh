#!/usr/bin/env bash
# The PyTorch the launcher assumes for Python workers (read from disk, without starting Python) is
# the one their interpreter imports. Real virtual environments (`python3 -m venv --without-pip`)
# reach a stand-in torch package (an __init__.py and a version.py) as users reach theirs: through
# their site-packages, absolute and relative .pth lines (import and comment lines beside them), a
# setuptools editable install's finder, the system site packages, $PYTHONPATH. For each, the
# `# torch:` line of `acc-launch --dry_run` and the `Workers' PyTorch` line of `acc-launch env` are
# compared with what the interpreter itself finds (importlib.util.find_spec, which runs no torch).
#   torch_as_python_finds_it.sh ACC_LAUNCH [BASE_PYTHON]   (default /usr/bin/python3; exit 77 if
#                                                           it cannot make a venv)
set -uo pipefail
launcher=$1
base=${2:-/usr/bin/python3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! "$base" -m venv --without-pip "$out/venv" >/dev/null 2>&1 ||
    ! "$base" -m venv --without-pip --system-site-packages "$out/system" >/dev/null 2>&1; then
  echo "SKIP: $base cannot make a virtual environment"
  exit 77
fi
site=$("$out/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
status=0

# A stand-in torch package of VERSION in DIR.
torch_in() {
  mkdir -p "$1/torch"
  : >"$1/torch/__init__.py"
  echo "__version__ = '$2'" >"$1/torch/version.py"
}
torch_in "$out/peers" 2.11.0+cu130
torch_in "$out/relative" 2.10.0
torch_in "$out/pytorch" 2.12.0a0+gitabcdef
torch_in "$out/mine" 2.4.1

# What PYTHON itself imports, in the dry run's words.
python_says() {
  "$1" -c '
import importlib.util, os, runpy, sys
spec = importlib.util.find_spec("torch")
if spec is None:
    print("# torch: not found for %s: renamed variables are given under both names" % sys.argv[1])
else:
    path = os.path.join(os.path.dirname(spec.origin), "version.py")
    print("# torch: %s (%s)" % (runpy.run_path(path)["__version__"], path))' "$1"
}

# The launcher's answers for PYTHON, each compared with the interpreter's: CASE names the layout.
check() {
  local what=$1 python=$2 expected dry env_line env_expected
  expected=$(python_says "$python")
  dry=$("$launcher" --dry_run --nproc_per_node 1 --python "$python" "$out/train.py" 2>&1 |
    grep '^# torch:')
  if [ "$dry" != "$expected" ]; then
    echo "FAIL ($what): the dry run says '$dry', $python imports '$expected'"
    status=1
  fi
  env_line=$("$launcher" env --python "$python" | sed -n "s/^- Workers' PyTorch: //p")
  env_expected=${expected#\# torch: }
  case $env_expected in
    "not found for"*) env_expected="not found (the workers get renamed variables under both names)" ;;
  esac
  if [ "$env_line" != "$env_expected" ]; then
    echo "FAIL ($what): acc-launch env says '$env_line', $python imports '$env_expected'"
    status=1
  fi
  echo "$what: $expected"
}

check "no torch in the venv" "$out/venv/bin/python"
echo "$out/peers" >"$site/peers.pth"
check "an absolute .pth line" "$out/venv/bin/python"
# Name order: a.pth before peers.pth; its import and comment lines are no paths.
relative=$(realpath --relative-to="$site" "$out/relative")
printf 'import sys\n# %s\n\n%s\n' "$out/pytorch" "$relative" >"$site/a.pth"
check "a relative .pth line, read before a later file's" "$out/venv/bin/python"
PYTHONPATH="$out/mine" check "PYTHONPATH before the site" "$out/venv/bin/python"
rm "$site/a.pth" "$site/peers.pth"

# An editable install as setuptools >= 64 leaves it: a .pth that imports a finder, which maps the
# package to its source tree and is asked after the path.
finder=__editable___torch_2_12_0a0_finder
echo "import $finder; $finder.install()" >"$site/__editable__.torch-2.12.0a0.pth"
cat >"$site/$finder.py" <<EOF
import sys
from importlib.util import spec_from_file_location

MAPPING: dict[str, str] = {'functorch': '$out/pytorch/functorch', 'torch': '$out/pytorch/torch'}


class _EditableFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname not in MAPPING:
            return None
        return spec_from_file_location(fullname, MAPPING[fullname] + "/__init__.py",
                                       submodule_search_locations=[MAPPING[fullname]])


def install():
    if not any(finder == _EditableFinder for finder in sys.meta_path):
        sys.meta_path.append(_EditableFinder)
EOF
check "an editable install's finder" "$out/venv/bin/python"
mkdir -p "$out/path"
echo "$out/peers" >"$out/path/peers.pth"
PYTHONPATH="$out/path" check "a PYTHONPATH directory's .pth, which Python does not read" \
  "$out/venv/bin/python"

# The system site packages (Debian's python3-torch where installed), after the venv's own .pth.
check "the system site packages" "$out/system/bin/python"
system_site=$("$out/system/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$out/peers" >"$system_site/peers.pth"
check "the system site packages, after the venv's .pth" "$out/system/bin/python"

# acc-launch env picks the interpreter as a launch does: here $PYTHON_EXEC.
line=$(PYTHON_EXEC="$out/venv/bin/python" "$launcher" env | grep "^- Workers' Python: ")
if [ "$line" != "- Workers' Python: $out/venv/bin/python (\$PYTHON_EXEC)" ]; then
  echo "FAIL: with PYTHON_EXEC set, acc-launch env says '$line'"
  status=1
fi

[ $status -eq 0 ] && echo "PASS: the launcher's torch is the one the interpreter imports"
exit $status

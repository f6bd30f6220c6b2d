#!/usr/bin/env bash
# Installs the modern Python peer the tests and benches compare against: PyTorch 2.x and
# HuggingFace Accelerate, pinned, from PyPI, into a virtual environment outside the repository
# (Debian has no package of either at these versions). Reused when present and complete: a machine
# that already has it returns at once without asking PyPI.
#
#   scripts/install-python-peers.sh           installs (or checks) the environment
#   scripts/install-python-peers.sh --python  prints the environment's python and nothing else
#
# ACC_PEERS_VENV: where the environment lives (default /opt/acc-launch/peers-venv).
# Debian's python3-torch 1.13 under /usr/bin/python3 stays the other peer (install-deps.sh --test).
set -euo pipefail

venv=${ACC_PEERS_VENV:-/opt/acc-launch/peers-venv}
# What the GPU machines run (PyTorch 2.11.0+cu130, Accelerate 1.15); PyPI's wheel of torch is the
# CUDA build, which runs on a machine without a GPU as its CPU build would.
# auditwheel: what the wheel's test (tests/wheel/fresh_venv.sh) asks which manylinux tag it meets;
# twine: what checks the wheel's and the sdist's metadata; torchx: the scheduler front end whose
# component acc_launch.torchx.ddp is (tests/torchx).
pins=(torch==2.11.0 accelerate==1.15.0 auditwheel==6.8.2 twine==7.0.0 torchx==0.7.0)
stamp="$venv/.acc-launch-pins"

case "${1:-}" in
  --python) echo "$venv/bin/python"; exit 0 ;;
  "") ;;
  *) echo "install-python-peers: usage: install-python-peers.sh [--python]" >&2; exit 2 ;;
esac

if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "${pins[*]}" ]; then
  exit 0
fi
echo "install-python-peers: installing ${pins[*]} into $venv (from PyPI)"
start=$(date +%s)
/usr/bin/python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "${pins[@]}"
"$venv/bin/python" -c 'import torch, accelerate, auditwheel, twine, torchx; print("install-python-peers: torch", torch.__version__, "accelerate", accelerate.__version__)'
echo "${pins[*]}" >"$stamp"
echo "install-python-peers: done in $(($(date +%s) - start)) s ($(du -sh "$venv" | cut -f1))"

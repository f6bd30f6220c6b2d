#!/usr/bin/env bash
# Installs, from Debian's archive only, the packages acc-launch needs. Idempotent: a machine that
# already has them all returns at once without touching apt.
#
#   scripts/install-deps.sh          what building and `make demo` need
#   scripts/install-deps.sh --test   that, plus what only the tests use: schedulers, daemons and
#                                    debuggers (SLURM, Open MPI, sshd, etcd, eu-stack, gdb),
#                                    universal-ctags (the function-length check), a
#                                    Prometheus, a headless Chromium, tmux and curl,
#                                    debootstrap (the wheel's Debian 12 root: tests/wheel/), and
#                                    PyTorch's Python peer. `make test` asks for these; `make`,
#                                    `make demo` and `make install` never install a daemon.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  clang clang-format libclang-rt-14-dev
  libcli11-dev libyaml-cpp-dev libboost-dev libboost-system-dev libspdlog-dev libfmt-dev
  nlohmann-json3-dev liburing-dev libssl-dev
  libgtest-dev libgmock-dev
  libtorch-dev libgloo-dev
  dataset-fashion-mnist
)
test_packages=(
  python3-torch
  procps iproute2 util-linux
  slurm-wlm munge openmpi-bin
  openssh-server openssh-client etcd-server etcd-client
  elfutils gdb
  universal-ctags
  prometheus chromium tmux curl openssl
  debootstrap
)

case "${1:-}" in
  --test) packages+=("${test_packages[@]}") ;;
  "") ;;
  *) echo "install-deps: usage: install-deps.sh [--test]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# A daemon installed for the tests must not start (or stay enabled) on the machine itself: the
# tests start their own instances on loopback or in network namespaces.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
fi
trap '[ $made_policy -eq 1 ] && rm -f "$policy"' EXIT
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

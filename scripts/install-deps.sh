#!/usr/bin/env bash
# Installs, from Debian's archive only, every package acc-launch needs to build, test and run its
# demo. Idempotent: a machine that already has them all returns at once without touching apt.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  clang clang-format libclang-rt-14-dev
  libcli11-dev libyaml-cpp-dev libboost-dev libboost-system-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev
  libtorch-dev libgloo-dev python3-torch
  dataset-fashion-mnist
  procps iproute2 util-linux
  slurm-wlm munge openmpi-bin
)

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
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

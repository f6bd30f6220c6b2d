#!/usr/bin/env bash
# Installs, from Debian's archive only, what `make wheel ARCH=aarch64` needs to cross-build the
# aarch64 acc-launch on an x86-64 Debian 12, and what tests/wheel/aarch64_qemu.sh runs it with.
# Idempotent: a machine that has it all returns at once without touching apt.
#
#   scripts/install-cross-aarch64.sh          installs (or checks); needs root
#   scripts/install-cross-aarch64.sh --path   prints where the arm64 libraries live, nothing else
#
# What it installs:
#   - dpkg's foreign architecture arm64 (apt then reads the arm64 package lists);
#   - the cross compiler and binutils (g++-aarch64-linux-gnu: gcc 12 as the native one, with the
#     arm64 C library and libstdc++ under /usr/aarch64-linux-gnu), qemu-user-static and
#     binfmt-support (the test). That is crossbuild-essential-arm64 less dpkg-cross, which no CMake
#     build uses and whose Perl modules would upgrade this machine's perl;
#   - the arm64 build packages of acc-launch (those of scripts/install-deps.sh that the acc-launch
#     target reads), unpacked into a root of their own, ACC_AARCH64_ROOT (default
#     /opt/acc-launch/aarch64-root; cmake/toolchain-aarch64.cmake looks there), not installed as
#     :arm64 multiarch packages: libyaml-cpp-dev is not Multi-Arch: same, so its arm64 package
#     would remove the amd64 one the native build links, and the others must match the amd64
#     versions to the byte, which here means upgrading amd64 libssl3, krb5, linux-libc-dev, ...
#     The root holds the packages' files as dpkg lays them out (usr/include,
#     usr/lib/aarch64-linux-gnu), and a stamp, .acc-launch-root: the list, then each version.
set -euo pipefail

root=${ACC_AARCH64_ROOT:-/opt/acc-launch/aarch64-root}
stamp="$root/.acc-launch-root"
host_packages=(g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user-static binfmt-support)
# The arm64 packages of the root: the -dev packages acc-launch's CMake finds, and the shared
# libraries their CMake files name (those check the files exist; acc-launch links the archives or
# the headers only), and dash, an arm64 /bin/sh for the test's workers. CLI11 and nlohmann-json
# are arch-independent, yet here too: the toolchain file lets CMake find nothing of the build
# machine's.
root_packages=(libyaml-cpp-dev libyaml-cpp0.7 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
               liburing-dev liburing2 libssl-dev libssl3 libboost1.74-dev dash)
root_packages_all=(libcli11-dev nlohmann-json3-dev)

case "${1:-}" in
  --path) echo "$root"; exit 0 ;;
  "") ;;
  *) echo "install-cross-aarch64: usage: install-cross-aarch64.sh [--path]" >&2; exit 2 ;;
esac

missing=()
for p in "${host_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
listed="arm64 ${root_packages[*]} ${root_packages_all[*]}"
root_ok=0
[ "$(head -1 "$stamp" 2>/dev/null)" = "$listed" ] && root_ok=1
[ ${#missing[@]} -eq 0 ] && [ $root_ok -eq 1 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  [ $root_ok -eq 1 ] || missing+=("the arm64 packages in $root")
  echo "install-cross-aarch64: missing ${missing[*]}; run it as root:" \
    "scripts/install-cross-aarch64.sh" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "install-cross-aarch64: dpkg --add-architecture arm64"
  dpkg --add-architecture arm64
fi
# The arm64 package lists too, once the architecture is added.
if [ ${#missing[@]} -gt 0 ] || ! apt-cache show libyaml-cpp-dev:arm64 >/dev/null 2>&1; then
  apt-get update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-cross-aarch64: installing ${missing[*]}"
  # binfmt-support's service must not start here: the test registers qemu-aarch64 itself.
  policy=/usr/sbin/policy-rc.d
  made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
  fi
  trap '[ $made_policy -eq 1 ] && rm -f "$policy"' EXIT
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ $root_ok -eq 0 ]; then
  echo "install-cross-aarch64: unpacking ${listed#arm64 } (arm64) into $root"
  partial="$root.partial"
  rm -rf "$partial"
  mkdir -p "$partial/debs"
  # apt-get download runs as _apt where it can: the directory must be its to write.
  chown _apt "$partial/debs" 2>/dev/null || true
  (cd "$partial/debs" &&
    apt-get download -qq "${root_packages[@]/%/:arm64}" "${root_packages_all[@]}")
  for deb in "$partial"/debs/*.deb; do
    dpkg-deb -x "$deb" "$partial"
  done
  versions=$(for deb in "$partial"/debs/*.deb; do
    dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb"; done)
  rm -rf "$partial/debs" "$partial"/usr/share/{doc,lintian,man}
  printf '%s\n%s\n' "$listed" "$versions" >"$partial/.acc-launch-root"
  rm -rf "$root"
  mv "$partial" "$root"
fi
echo "install-cross-aarch64: done ($(du -sh "$root" | cut -f1) in $root)"

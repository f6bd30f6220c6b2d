#!/usr/bin/env bash
# Makes the minimal Debian 12 root the wheel's install test runs in (tests/wheel/debian12_root.sh):
# `debootstrap --variant=minbase` of bookworm with python3 and python3-venv and none of the build's
# packages (no compiler, no libstdc++ headers, no yaml-cpp, no LibTorch), from the Debian archive
# apt on this machine uses. Outside the repository and reused when present, as the peers'
# environment (install-python-peers.sh): a machine that has it returns at once.
#
#   scripts/install-debian12-root.sh          makes (or checks) the root; needs root and debootstrap
#   scripts/install-debian12-root.sh --path   prints where it lives and nothing else
#
# ACC_DEBIAN12_ROOT: where the root lives (default /opt/acc-launch/debian12-root).
set -euo pipefail

root=${ACC_DEBIAN12_ROOT:-/opt/acc-launch/debian12-root}
packages=python3,python3-venv
stamp="$root/.acc-launch-root"

case "${1:-}" in
  --path) echo "$root"; exit 0 ;;
  "") ;;
  *) echo "install-debian12-root: usage: install-debian12-root.sh [--path]" >&2; exit 2 ;;
esac

[ -x "$root/usr/bin/python3" ] && [ "$(cat "$stamp" 2>/dev/null)" = "bookworm $packages" ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v debootstrap >/dev/null; then
  echo "install-debian12-root: making $root needs root and debootstrap (scripts/install-deps.sh --test)" >&2
  exit 1
fi
# The archive apt uses here (deb822 or one-line sources), else Debian's own.
mirror=$({ sed -n 's/^URIs: *\([^ ]*\).*/\1/p; s/^deb  *\(\[[^]]*\] *\)\?\(http[^ ]*\) .*/\2/p' \
  /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true; } | grep -v security | head -1 || true)
mirror=${mirror:-http://deb.debian.org/debian}
echo "install-debian12-root: debootstrap of bookworm (minbase, $packages) from $mirror into $root"
start=$(date +%s)
partial="$root.partial"
rm -rf "$partial"
mkdir -p "$(dirname "$root")"
debootstrap --variant=minbase --include="$packages" bookworm "$partial" "$mirror" \
  >"$partial.log" 2>&1 || { tail -20 "$partial.log" >&2; exit 1; }
rm -f "$partial.log"
# What the test needs of the root only: no package cache.
rm -rf "$partial"/var/cache/apt/archives/*.deb
echo "bookworm $packages" >"$partial/.acc-launch-root"
rm -rf "$root"
mv "$partial" "$root"
echo "install-debian12-root: done in $(($(date +%s) - start)) s ($(du -sh "$root" | cut -f1))"

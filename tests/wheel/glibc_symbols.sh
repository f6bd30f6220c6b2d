#!/usr/bin/env bash
# acc-launch needs nothing of glibc newer than GLIBC_2.34 (RHEL 9, Ubuntu 22.04 with its 2.35,
# Debian 12, the wheel's manylinux_2_34 tag), and loads only the C library, libm and libgcc_s:
# no libstdc++.so (linked in for start-up), nothing a plain Linux system lacks.
# Usage: glibc_symbols.sh BINARY
set -euo pipefail
binary=$1
fail() { echo "FAIL: $*"; exit 1; }
symbols=$(objdump -T "$binary")
too_new=$(grep -E '\bGLIBC_2\.(3[5-9]|[4-9][0-9])\b' <<<"$symbols" || true)
[ -z "$too_new" ] || fail "$binary needs symbols newer than GLIBC_2.34:
$too_new"
newest=$(grep -oE '\bGLIBC_2\.[0-9]+\b' <<<"$symbols" | sort -t. -k2,2n -u | tail -1)
echo "PASS: the newest glibc symbol version $binary needs is $newest"
needed=$(objdump -p "$binary" | awk '$1 == "NEEDED" { print $2 }' | sort | tr '\n' ' ')
for library in $needed; do
  case "$library" in
    libc.so.6 | libm.so.6 | libgcc_s.so.1 | ld-linux-*.so.*) ;;
    *) fail "$binary needs $library (only libc, libm and libgcc_s: $needed)" ;;
  esac
done
echo "PASS: it loads only $needed"

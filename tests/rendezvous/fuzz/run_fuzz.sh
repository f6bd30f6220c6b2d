#!/usr/bin/env bash
# Builds the store codec's libFuzzer target with clang and runs it for a bounded time.
# Usage: run_fuzz.sh SOURCE_DIR WORK_DIR [SECONDS]
# Exits 77 (skipped) when clang++ or its libFuzzer runtime (libclang-rt-14-dev) is missing.
set -euo pipefail
src=$1
work=$2
seconds=${3:-20}
clangxx=$(command -v clang++ || command -v clang++-14 || true)
if [ -z "$clangxx" ]; then
  echo "skipped: clang++ not found"
  exit 77
fi
mkdir -p "$work/corpus"
probe="$work/probe.cc"
echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' >"$probe"
if ! "$clangxx" -fsanitize=fuzzer "$probe" -o "$work/probe" 2>/dev/null; then
  echo "skipped: $clangxx cannot link -fsanitize=fuzzer (install libclang-rt-14-dev)"
  exit 77
fi
"$clangxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$src/rendezvous/include" -I"$src/rendezvous/src" -I"$src/common/include" \
  "$src/tests/rendezvous/fuzz/protocol_fuzz.cc" "$src/rendezvous/src/protocol.cc" \
  "$src/rendezvous/src/store_state.cc" -o "$work/protocol_fuzz"
# Seeds: a 1.13 SET as seen on the wire, and a 2.2 handshake followed by a PING and a WAIT.
printf '\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00/k\x01\x00\x00\x00\x00\x00\x00\x00v' >"$work/corpus/set113"
printf '\x01\x00\xce\xf7\x85\x3c\x0d\x01\x02\x03\x04\x06\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00a' >"$work/corpus/v22"
"$work/protocol_fuzz" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 "$work/corpus"

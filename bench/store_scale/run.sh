#!/usr/bin/env bash
# store_scale: N simulated PyTorch 2.x ranks doing init_process_group's store traffic and the
# store-based barrier, one connection each from one epoll thread, against acc-launch's store
# server and PyTorch 2.x's libuv server at each count. Not part of `make test`.
#
# Usage: bench/store_scale/run.sh [BUILD_DIR] [--ranks 1000,10000,100000] [--timeout-s 60]
#          [--torch-timeout-s 120] [--window 500]
#   BUILD_DIR (default build): where acc-launch and store_scale are built (made here if missing).
#   ACC_TORCH2_PYTHON (default /opt/acc-launch/peers-venv/bin/python): a Python whose torch is
#     2.x, for PyTorch's server; without one, PyTorch's column says "not run".
# The open-file limit: each side holds one descriptor per rank (per descriptor table: our server's
# threads each have one of their own, PyTorch's has one), so the script raises the soft
# limit to the hard one and, where the hard one is short and it may (root), the hard one to what
# the count needs (within fs.nr_open; no sysctl is changed). The whole run is bounded by `timeout`.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  build=$1
  shift
fi
python2=${ACC_TORCH2_PYTHON:-/opt/acc-launch/peers-venv/bin/python}
say() { echo "bench/store_scale/run.sh: $*" >&2; }

ranks=1000,10000,100000 timeout_s=60 torch_timeout_s=120
args=("$@")
for ((i = 0; i + 1 < ${#args[@]}; i += 2)); do
  case ${args[i]} in
    --ranks) ranks=${args[i + 1]} ;;
    --timeout-s) timeout_s=${args[i + 1]} ;;
    --torch-timeout-s) torch_timeout_s=${args[i + 1]} ;;
  esac
done
largest=$(tr ',' '\n' <<<"$ranks" | sort -n | tail -1)

if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    $(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) >/dev/null
fi
if ! cmake --build "$build" --target store_scale acc-launch >/dev/null; then
  say "cannot build store_scale and acc-launch in $build"
  exit 2
fi

# Descriptors: a server holds one per rank, plus a margin for its own (the clients are spread
# over processes under the limit). Where the hard limit is short and cannot be raised (raising it
# takes CAP_SYS_RESOURCE), the run goes on and shows where the servers stop.
need=$((largest + 1024))
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt "$need" ]; then
  nr_open=$(cat /proc/sys/fs/nr_open)
  if [ "$need" -le "$nr_open" ] && ulimit -Hn "$need" 2>/dev/null; then
    say "raised the hard open-file limit to $need for this run (fs.nr_open is $nr_open)"
  else
    say "a server needs $need open files for $largest ranks in one descriptor table; the hard" \
      "limit is $(ulimit -Hn) and cannot be raised here (it takes CAP_SYS_RESOURCE: root's" \
      "ulimit -Hn, or LimitNOFILE= / limits.conf): PyTorch's server stops near $(ulimit -Hn)" \
      "connections; ours serves from threads with descriptor tables of their own"
  fi
fi
ulimit -n "$(ulimit -Hn)"

torch_args=()
if [ -x "$python2" ] &&
  "$python2" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null; then
  torch_args=(--torch-python "$python2" --torch-server bench/store_scale/torch_server.py)
else
  say "no PyTorch 2.x at '$python2' (set ACC_TORCH2_PYTHON): PyTorch's server is not run"
fi

# In a network namespace of its own where it can (bench/common/netns.sh): PyTorch's server makes a
# reverse lookup per connection, and where the resolver does not answer, each costs its timeout,
# 5 s, on the server's loop.
# shellcheck source=bench/common/netns.sh
source bench/common/netns.sh
if [ ${#netns[@]} -eq 0 ]; then
  say "cannot make a network namespace: on the machine's loopback, PyTorch's server's reverse" \
    "lookups wait on its name server"
fi

counts=$(tr ',' '\n' <<<"$ranks" | grep -c .)
bound=$((counts * (timeout_s + torch_timeout_s + 30) + 60))
echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
rc=0
run=("$build/bench/store_scale/store_scale" --acc-launch "$build/launcher/acc-launch"
  "${torch_args[@]}" "$@")
bounded_in_netns "$bound" "${run[@]}" || rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  say "timed out: store_scale did not finish in $bound s"
fi
exit "$rc"  # store_scale's last line is the summary

#!/bin/sh
# A worker that writes down what it was started with: its environment and its arguments, into
# $ACC_ENV_DUMP/rank<RANK> (rank "none" without RANK: Accelerate's simple launcher). Started by
# both launchers in against_accelerate_launch.py.
out="$ACC_ENV_DUMP/rank${RANK-none}"
printf '%s\0' "$0" "$@" >"$out.argv"
env -0 >"$out.env"

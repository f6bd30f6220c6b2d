#!/usr/bin/env bash
# Runs a command (a test suite) with TMPDIR set to a directory of its own, removes that directory
# when the command ends, and exits with the command's status. What the tests leave in temporary
# directories goes with it: the run directories acc-launch keeps after a hang (with its report),
# those of launchers the tests kill with SIGKILL, scratch files. The directory is on /dev/shm where
# that is a writable tmpfs with 1 GiB free (short jobs' run directories are made and removed there
# by default: docs/launch.md, "Output"), else under /tmp.
# Usage: scripts/in-test-tmpdir.sh COMMAND [ARG...]
set -uo pipefail
base=/tmp
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ -w /dev/shm ] &&
  [ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -ge $((1024 * 1024)) ]; then
  base=/dev/shm
fi
dir=$(mktemp -d "$base/acc-launch-tests.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
TMPDIR=$dir "$@"

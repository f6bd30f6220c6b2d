# Sourced first by a test script that serves fixed ports on loopback: the rest of the script runs
# in a network namespace of its own (its loopback up), whose ports are the script's alone, instead
# of learning a free port and releasing it, which another test may take in between.
# Exits 77 (skipped) where a network namespace cannot be made.
if [ -z "${ACC_OWN_LOOPBACK:-}" ]; then
  command -v unshare >/dev/null && unshare --net true 2>/dev/null ||
    { echo "SKIP: cannot make a network namespace"; exit 77; }
  exec env ACC_OWN_LOOPBACK=1 unshare --net bash -c 'ip link set lo up && exec bash "$@"' bash \
    "$0" "$@"
fi

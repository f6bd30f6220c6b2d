# shellcheck shell=bash
# Sourced by the scale benches' run.sh (bench/store_scale, bench/rendezvous_scale): a network
# namespace of their own with only loopback up, where this user can make one (root, or a user
# namespace where allowed). Their ports and their listeners' queues are then nobody else's, its
# sysctls are the kernel's defaults, and a reverse lookup of a peer's address fails at once
# instead of waiting on a name server.
#
# netns: the unshare command line, or empty where no namespace can be made (the caller says so).
# bounded_in_netns SECONDS COMMAND...: COMMAND in the namespace (or on the machine's loopback),
#   killed after SECONDS.
netns=()
if unshare -n true 2>/dev/null; then
  netns=(unshare -n)
elif unshare -rn true 2>/dev/null; then
  netns=(unshare -rn)
fi

bounded_in_netns() {
  local seconds=$1
  shift
  if [ ${#netns[@]} -gt 0 ]; then
    # shellcheck disable=SC2016 # expanded in the namespace's shell
    timeout -k 5 "$seconds" "${netns[@]}" sh -c 'ip link set lo up && exec "$@"' sh "$@"
  else
    timeout -k 5 "$seconds" "$@"
  fi
}

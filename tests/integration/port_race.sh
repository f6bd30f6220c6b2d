# Sourced by the scripts whose servers cannot listen on port 0 and tell their port (a static
# --master_port, torchrun, Accelerate's main_process_port): they get a port that was free a
# moment ago, and run again on a new one when another process took it in between.

# A loopback port nobody listened on a moment ago.
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# retry_on_port_race FUNCTION LOG...: sets $port and runs FUNCTION; when it fails and one of the
# LOG files says the port was taken, runs it again on a new port (5 times at most). Returns
# FUNCTION's status.
retry_on_port_race() {
  local run=$1 rc=0
  shift
  for _ in 1 2 3 4 5; do
    port=$(free_port)
    "$run"
    rc=$?
    [ $rc -ne 0 ] && grep -qiE 'already in use|EADDRINUSE' "$@" 2>/dev/null || return $rc
    echo "port $port was taken meanwhile: again on another"
  done
  return $rc
}

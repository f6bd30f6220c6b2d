#pragma once

// The fan-out head's ssh sessions, one per host, on the launcher's Supervisor (process/
// supervisor.h) over the Os seam, as one node's workers are: a parallel `ssh host true` probe of
// every host, then one ssh per host running that node's acc-launch, its output relayed with the
// host's name, and every node stopped when one fails or the head is interrupted.
//
// Stopping: the head closes each ssh's stdin; ssh passes the end of file on, and the remote
// launcher (--stop_on_stdin_eof) stops its workers as on SIGTERM and exits, which ends the ssh.
// An ssh still running `stop_grace` later gets SIGKILL: the connection drops, and the remote
// launcher sees the end of its stdin all the same.
//
// The caller has given the Os the head's stop signals (Os::take_signals) before either call.

#include <string>
#include <vector>

#include "acc/launcher/nodes/fanout.h"
#include "process/os.h"

namespace acc::launcher {

// One host's ssh: the node and the whole command line (argv[0] "ssh", found in the PATH).
struct RemoteSession {
  RemoteNode node;
  std::vector<std::string> argv;
};

struct RemoteJobSettings {
  std::vector<std::string> env;  // ssh's environment, "KEY=VALUE"
  std::string path;              // the PATH value ssh is found in
  // From the end of file on the nodes' stdins to SIGKILL: past their own --shutdown_timeout.
  Os::Clock::duration stop_grace{};
  // After SIGKILL, how long an ssh may take to end before it is given up on (--kill_timeout).
  Os::Clock::duration kill_timeout{};
};

// Runs every probe (`ssh host true`) at once and waits for all of them. Throws NetworkError
// naming the first host (in the list's order) whose probe failed, with the last line ssh wrote;
// InterruptedError when a stop signal arrives (the probes killed and reaped first).
void probe_hosts(Os& os, const std::vector<RemoteSession>& probes,
                 const RemoteJobSettings& settings);

// Runs one ssh per host until every one has ended. Returns the job's exit status: 0 when every
// ssh exited 0; else the first failing node's own status (128+N for signal N; ssh's 255 when its
// connection broke); 128+N when the head received stop signal N (a second one: SIGKILL to every
// ssh at once). Throws LaunchError when an ssh cannot be started (after ending those that were).
int run_remote_job(Os& os, const std::vector<RemoteSession>& sessions,
                   const RemoteJobSettings& settings);

}  // namespace acc::launcher

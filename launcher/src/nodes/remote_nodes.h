#pragma once

// Running a fanned-out job from the head node (fanout.h builds the commands, remote_job.h runs
// them on the launcher's process supervisor): a parallel `ssh host true` probe of every host,
// then one ssh per host running that node's acc-launch, its output relayed with the host's name,
// and every node stopped when one fails or the head is interrupted.
//
// Stopping: the head closes each ssh's stdin; ssh passes the end of file on, and the remote
// launcher (--stop_on_stdin_eof) stops its workers as on SIGTERM and exits, which ends the ssh.
// The same end of file reaches it when the connection drops or the head dies (its ssh children
// get SIGKILL with it: PR_SET_PDEATHSIG, and the watchdog for their process groups): no remote
// launcher outlives its session. Unlike `ssh -tt`, stdout and stderr stay apart and lines are
// not rewritten with '\r'.

#include <optional>
#include <string>
#include <vector>

#include "acc/launcher/cli/options.h"
#include "acc/launcher/plan/plan.h"
#include "process/os.h"

namespace acc::launcher {

// The one call main() makes after parsing. For the head of a fan-out (fanout.h wants_fanout)
// runs the whole job and returns its exit status: the failing node's own status, 128+signal when
// interrupted. For a remote launcher (--stop_on_stdin_eof) starts the stdin watch and returns
// nullopt, as for every other launch. Throws NetworkError when a host cannot be reached (before
// any worker starts anywhere), ConfigError for bad flags.
// `host` gives the environment sent to the nodes (detect_host()); `os` runs ssh and the nodes'
// launcher, and takes the head's stop signals (a remote launcher's stdin watch signals through it:
// it must outlive the process's main).
std::optional<int> fan_out_if_asked(const LaunchOptions& options, const HostInfo& host, Os& os);

}  // namespace acc::launcher

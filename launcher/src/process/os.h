#pragma once

// The launcher's process boundary, in one interface (leveldb's Env): starting a worker,
// signalling its group, seeing and reaping exits, what /proc says about a process, the clock
// (an Os is the launcher's rendezvous::Clock, so whatever the agent hands its Os as a clock reads
// the agent's time), and the wait for the next event. RealOs (real_os.h) is the machine; tests
// drive the agent over a scripted fake (tests/launcher/fake_os.h), so failures, restarts and
// workers that will not die are tested without real processes or wall-clock windows.
//
// Not thread-safe, the clock's methods included: one thread (the agent's) owns an Os.

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "acc/rendezvous/clock.h"
#include "process/spawn.h"

namespace acc::launcher {

class Os : public rendezvous::Clock {
 public:
  // Takes over SIGCHLD and `signals` (they reach wait() instead of killing the launcher),
  // ignores SIGPIPE, and makes the launcher the reaper of its workers' orphans. Call once,
  // before the first spawn. Throws SystemError.
  virtual void take_signals(const std::vector<int>& signals) = 0;

  // Starts a worker as spawn_process does (its own group, killed with the launcher, output
  // on the returned non-blocking pipes), finding the program in `path` (a PATH value) first,
  // and keeps the group in the watchdog's list until forget(). Throws LaunchError.
  virtual SpawnedProcess spawn(SpawnRequest request, const std::string& path) = 0;
  // Whether the process exec'd; throws LaunchError when it could not (see await_exec).
  virtual void await_exec(SpawnedProcess& process) = 0;
  // The group is gone: the watchdog need not kill it should the launcher die.
  virtual void forget(pid_t process_group) = 0;
  // No worker runs and none will start: the watchdog may end now (RealOs reaps it at its
  // destruction), while the launcher cleans up.
  virtual void dismiss_watchdog() {}

  // Sends `sig` to every process of the group `process_group`; one already gone is no error.
  virtual void signal_group(pid_t process_group, int sig) = 0;
  virtual void signal_process(pid_t pid, int sig) = 0;

  // A child that has exited and is not reaped yet, left unreaped (so its pid, and the id of
  // the group it led, cannot be reused while the caller clears the group); none: nullopt.
  // Of several, the one that exited first where the machine can tell (the failure that ended a
  // job comes before the failures it caused a millisecond later). Never blocks.
  virtual std::optional<pid_t> exited_child() = 0;
  // Reaps the exited child `pid` (from exited_child()) and returns its status as waitpid
  // reports it; `peak_rss_kib`, when given, gets its peak resident set (wait4's ru_maxrss, KiB),
  // or -1 where the OS cannot tell.
  virtual int reap(pid_t pid, long* peak_rss_kib = nullptr) = 0;

  // The children of the launcher that it did not start through spawn() and are not its own
  // helpers: what the workers left behind and the kernel gave to us (the subreaper).
  virtual std::vector<pid_t> orphans() = 0;

  // What /proc/<pid> says: the state letter ('R', 'S', 'D', 'Z', ...; '?' when the process is
  // gone) and the kernel function it sleeps in ("" when not known).
  struct ProcessState {
    char state = '?';
    std::string wchan;
  };
  virtual ProcessState process_state(pid_t pid) = 0;

  // Waits until one of `fds` is ready (their revents set), a taken signal arrives, or
  // `deadline` passes (none: no limit). Returns the signals that arrived, SIGCHLD among them
  // when a child exited. Throws SystemError.
  virtual std::vector<int> wait(std::vector<pollfd>& fds, std::optional<time_point> deadline) = 0;
};

}  // namespace acc::launcher

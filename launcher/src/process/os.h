#pragma once

// The launcher's process boundary, in one interface (leveldb's Env): starting a worker,
// signalling its group, seeing and reaping exits, what /proc says (proc::Reader), the programs
// it runs beside the workers (debuggers, scontrol, itself), the clock (an Os is the launcher's
// rendezvous::Clock, so whatever the agent hands its Os as a clock reads the agent's time), and
// the wait for the next event. RealOs (real_os.h) is the machine; tests drive the agent, the
// stall watch, the stack dumper and `acc-launch stacks` over a scripted fake
// (tests/launcher/fake_os.h), so failures, restarts, workers that will not die and debuggers that
// hang are tested without real processes or wall-clock windows. Nothing else in the launcher
// kills, waits, spawns, sleeps, reads the clock or reads /proc: the machine's own files (/proc's
// machine-wide entries, cgroups, /sys) go through MachineFiles (host/machine_files.h), and the
// libraries below the launcher through acc/common/clock.h and acc/common/processes.h
// (tests/structure/seam.sh checks the whole tree).
//
// Not thread-safe, the clock's methods included: one thread (the agent's) owns an Os.

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "acc/common/error.h"
#include "acc/rendezvous/clock.h"
#include "process/proc.h"
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
  // Standbys (agent/standbys.h): a process spawned with a channel_fd is one, no orphan, until
  // hand_over() gives it its worker (spawn.h; the process then is the worker) or forget(). The
  // default (a fake's): none kept, and hand_over throws LaunchError.
  virtual bool can_keep_standbys() const { return false; }
  virtual SpawnedProcess hand_over(SpawnRequest request, pid_t standby, int channel) {
    (void)request, (void)standby, (void)channel;
    throw LaunchError("no standbys here");
  }
  // `pid`, a child the launcher adopted as the subreaper (a standby's heir), is a standby too.
  virtual void adopt_standby(pid_t pid) { (void)pid; }
  // The group is gone: the watchdog need not kill it should the launcher die.
  virtual void forget(pid_t process_group) = 0;
  // No worker runs and none will start: the watchdog may end now (RealOs reaps it at its
  // destruction), while the launcher cleans up.
  virtual void dismiss_watchdog() {}

  // Sends `sig` to every process of the group `process_group`; one already gone is no error.
  virtual void signal_group(pid_t process_group, int sig) = 0;
  // Sends `sig` (0: none, a check) to the process `pid`, any process, not only a worker. Returns
  // whether it could: false when it is gone or not ours to signal.
  virtual bool signal_process(pid_t pid, int sig) = 0;

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

  // What /proc says of the other processes, of this program and of this machine (proc.h).
  virtual proc::Reader& proc() = 0;

  // Programs beside the workers: the debuggers of the stack dump, scontrol, the launcher itself.
  // The path of `program` as the shell would find it in the launcher's PATH; "" when not found.
  virtual std::string find_program(const std::string& program) = 0;
  // Starts `argv` (argv[0] a path) with no signal blocked, stdin from /dev/null, stdout into the
  // file `stdout_path` (truncated) and stderr to /dev/null. Returns its pid, -1 when it could not
  // start. Does not block: see exit_status().
  virtual pid_t start_program(const std::vector<std::string>& argv,
                              const std::string& stdout_path) = 0;
  // Runs `argv` (argv[0] a path) with the launcher's stdin, stdout and stderr and waits for it.
  // Returns its status as waitpid reports it. Throws LaunchError when it cannot start.
  virtual int run_program(const std::vector<std::string>& argv) = 0;
  // Runs `argv` (argv[0] a path) with stdin from /dev/null and stderr to /dev/null and returns
  // what it wrote to stdout, once it has exited; nullopt when it could not start. Blocks.
  virtual std::optional<std::string> program_output(const std::vector<std::string>& argv) = 0;
  // The status of the child `pid` (from start_program) as waitpid reports it, reaped, once it has
  // exited; nullopt while it runs. Never blocks.
  virtual std::optional<int> exit_status(pid_t pid) = 0;
  // Replaces the launcher with `argv` (argv[0] as named, `executable` a path). Returns only by
  // throwing LaunchError, when it cannot.
  virtual void replace_with(const std::string& executable,
                            const std::vector<std::string>& argv) = 0;
  // The launcher's terminal. The size of the terminal `fd` is (columns and rows); nullopt when
  // it is none. The default (a fake's): no terminal.
  virtual std::optional<winsize> terminal_size(int fd) {
    (void)fd;
    return std::nullopt;
  }
  // Whether the launcher's process group is the foreground one of the terminal `fd`: it may read
  // it without being stopped (SIGTTIN).
  virtual bool in_foreground(int fd) {
    (void)fd;
    return false;
  }
  // Gives the pseudo-terminal whose master is `fd` (SpawnRequest::stdout_terminal) a new size.
  virtual void resize_terminal(int fd, const winsize& size) {
    (void)fd;
    (void)size;
  }

  // Waits until one of `fds` is ready (their revents set), a taken signal arrives, or
  // `deadline` passes (none: no limit). Returns the signals that arrived, SIGCHLD among them
  // when a child exited. Throws SystemError.
  virtual std::vector<int> wait(std::vector<pollfd>& fds, std::optional<time_point> deadline) = 0;
};

}  // namespace acc::launcher

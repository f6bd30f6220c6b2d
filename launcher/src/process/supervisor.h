#pragma once

// The launcher's children over the Os seam, as one node's workers (agent/worker_group.h) and the
// fan-out head's ssh sessions (nodes/remote_job.h) both need them: each started in its own
// process group and listed with the watchdog, its output read through Streams, its exit reaped
// the moment SIGCHLD says so (after clearing what it left in its group), and a stop in two
// steps: the owner's first step (SIGTERM to workers, end of file to ssh), then SIGKILL at a
// deadline; a child that SIGKILL does not end within the kill bound is given up on. Knows nothing
// of what the children are: the owner hears of exits and signals through a Listener and decides.
// Not thread-safe: one thread owns it.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "output/worker_stream.h"
#include "process/os.h"

namespace acc::launcher {

// One child as the supervisor sees it; owners derive from it for what else they keep.
struct Child {
  pid_t pid = -1;
  bool running = false;
  bool unkillable = false;  // still alive the kill bound after SIGKILL: given up on
  int status = 0;           // as waitpid reports it
  long peak_rss_kib = -1;   // its peak resident set once reaped (KiB), -1 when not known
  Stream out;
  Stream err;
};

class Supervisor {
 public:
  using Clock = Os::Clock;

  class Listener {
   public:
    virtual ~Listener() = default;
    // A taken signal other than SIGCHLD reached the launcher.
    virtual void on_signal(int sig) = 0;
    // `child` exited and is reaped: running is false, status set.
    virtual void on_exit(Child& child) = 0;
    // A one-line message for the user.
    virtual void notice(const std::string& message) = 0;
    // The children's pipes were read; `last`: for the last time, by finish() (a --dedup_lines
    // console writes what is due, or everything).
    virtual void on_output(bool last) { (void)last; }
    // A descriptor given to watch() is readable.
    virtual void on_readable(int fd) { (void)fd; }
  };

  // `children` names them in messages ("workers"); `kill_timeout` is the bound after SIGKILL.
  Supervisor(Os& os, Listener& listener, std::string children, Clock::duration kill_timeout);
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts `child` as Os::spawn does; its pid and pipes go into it (its Streams, set up by the
  // owner before, read them). `child` stays at its address while the supervisor lives. The
  // caller then calls Os::await_exec. Throws LaunchError.
  SpawnedProcess spawn(Child& child, SpawnRequest request, const std::string& path);
  // The same through a standby (Os::hand_over): `standby` becomes `child`. Throws SystemError
  // when the standby cannot take it.
  SpawnedProcess hand_over(Child& child, SpawnRequest request, pid_t standby, int channel);
  // Whether a child still runs (one given up on as unkillable no longer counts).
  bool running() const;
  // Waits for the next event, at most until `wake` (none: no limit beyond the supervisor's own
  // deadlines), and handles it: output, exits (to the listener), signals (to the listener), the
  // SIGKILL deadline and the kill bound. Throws SystemError.
  void wait_once(std::optional<Clock::time_point> wake);
  // Adds a descriptor of the listener's to the wait: on_readable(fd) when it can be read. The
  // caller keeps it open while the supervisor lives.
  void watch(int fd) { watched_fds_.push_back(fd); }
  // Stops watching `fd`.
  void unwatch(int fd) { std::erase(watched_fds_, fd); }
  // The owner has begun a stop: SIGKILL to every running child at `deadline`, `why` told to the
  // user then. A later call moves the deadline.
  void kill_at(Clock::time_point deadline, std::string why);
  // SIGKILL to every running child's group now; the kill bound starts at the first call.
  void kill();
  // Sends `sig` to every running child's group.
  void signal_all(int sig);
  // Drains and closes the output, then ends what the children left behind (reparented to us),
  // waiting at most the kill bound for it.
  void finish();
  // kill(), waits until every child is reaped or given up on (the kill bound), then finish():
  // the way out when starting the children failed.
  void end_now();

  bool stopping() const { return stopping_; }

 private:
  SpawnedProcess adopt(Child& child, SpawnedProcess process);
  void read_streams(const std::vector<pollfd>& fds, const std::vector<Stream*>& streams);
  void reap_children();
  Child* find_child(pid_t pid);
  void give_up_on_unkillable();

  Os& os_;
  Listener& listener_;
  std::string children_name_;
  Clock::duration kill_timeout_;
  std::vector<Child*> children_;
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point kill_deadline_;   // SIGKILL after the owner's first step
  std::string kill_why_;              // said at kill_deadline_
  Clock::time_point given_up_after_;  // the kill bound after SIGKILL
  std::vector<int> watched_fds_;
};

}  // namespace acc::launcher

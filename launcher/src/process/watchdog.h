#pragma once

// A tiny helper process that outlives a launcher killed with SIGKILL just long enough to kill
// the process groups of its workers. PR_SET_PDEATHSIG reaches the workers themselves, but not
// what they started; the watchdog kills whole groups, grandchildren included.

#include <sys/types.h>

#include <cstddef>

namespace acc::launcher {
namespace detail {
struct WatchList;
}

class Watchdog {
 public:
  // Starts the watchdog: a process that shares the launcher's memory (clone with CLONE_VM; a
  // fork where that is not built in or the system refuses it), ignores the terminal's signals and
  // sleeps until the kernel tells it that the thread that started it died (PR_SET_PDEATHSIG):
  // start and end it in the thread that runs the workers. It then kills every group listed and
  // exits. Without a watchdog (no memory for it, no process) the workers' own PDEATHSIG remains.
  Watchdog();
  // Ends the watchdog (SIGKILL) and reaps it; the groups listed are left alone.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // A worker's group to kill should the launcher die; forget() once the group is gone. A list
  // in memory the watchdog reads only once the launcher is dead: no system call, no lock.
  void watch(pid_t process_group);
  void forget(pid_t process_group);
  // Ends the watchdog (SIGKILL) without waiting: once no worker runs or will start, the launcher
  // cleans up while it goes; the destructor reaps it. Watching stops here.
  void dismiss();
  pid_t pid() const { return pid_; }
  // Whether the system refused the clone that shares memory (qemu-user does), so that the
  // watchdog is a fork instead.
  bool clone_refused() const { return clone_refused_; }

  // Groups listed at once, at most (a launcher with more workers than this leaves the rest to
  // their PDEATHSIG).
  static constexpr size_t kCapacity = 1 << 16;

 private:
  pid_t pid_ = -1;
  bool dismissed_ = false;
  bool clone_refused_ = false;
  void* region_ = nullptr;  // the watchdog's stack, then its list
  detail::WatchList* list_ = nullptr;
};

}  // namespace acc::launcher

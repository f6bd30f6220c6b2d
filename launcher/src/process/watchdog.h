#pragma once

// A tiny helper process that outlives a launcher killed with SIGKILL just long enough to kill
// the process groups of its workers. PR_SET_PDEATHSIG reaches the workers themselves, but not
// what they started; the watchdog kills whole groups, grandchildren included.

#include <sys/types.h>

#include "acc/common/unique_fd.h"

namespace acc::launcher {

class Watchdog {
 public:
  // Forks the watchdog. It ignores the terminal's signals and waits on a pipe from us.
  Watchdog();
  // Tells it the job ended normally, then reaps it.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // A worker's group to kill should the launcher die; forget() once the group is gone.
  void watch(pid_t process_group);
  void forget(pid_t process_group);
  pid_t pid() const { return pid_; }

 private:
  void send(int value);
  pid_t pid_ = -1;
  UniqueFd pipe_;
};

}  // namespace acc::launcher

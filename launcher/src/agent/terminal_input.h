#pragma once

// The launcher's terminal as the workers' stdin. A worker cannot read the terminal itself: it
// leads a process group of its own, not the terminal's foreground one, so a read stops it
// (SIGTTIN) and `breakpoint()` would wait silently. Instead each worker reads a pipe of its own,
// and the launcher, while it is in the terminal's foreground, reads what is typed and gives each
// piece to the lowest rank that waits on its stdin (blocked reading it): every rank stopped at
// the same breakpoint() answers in turn. What is typed while no rank waits is held until one
// does. An end of file typed (Ctrl-D) is not passed on. Only for a launcher whose stdin is a
// terminal; elsewhere workers inherit the launcher's stdin as before. Not thread-safe: the
// agent's one thread owns it.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "acc/common/unique_fd.h"
#include "process/os.h"

namespace acc::launcher {

class TerminalInput {
 public:
  // How often held input looks again for a rank that waits.
  static constexpr std::chrono::milliseconds kLookAgain{100};

  // `terminal`: the launcher's stdin, a terminal. `before_answer(rank)` runs just before typed
  // input goes to the worker of `rank`: what it wrote before it blocked on its stdin (a prompt)
  // shows first, so that its answer cannot join the prompt's line.
  TerminalInput(Os& os, int terminal, std::function<void(int rank)> before_answer);

  // The stdin of the worker of global rank `rank` that is about to start: the read end of its
  // pipe, for SpawnRequest::stdin_fd (the caller closes it once the worker has started).
  UniqueFd add_worker(int rank);
  // The worker of `rank` started as process `pid`.
  void started(int rank, pid_t pid);

  // The descriptor to wait on now: the terminal while the launcher is in its foreground, else -1.
  int fd_to_watch();
  // The terminal is readable: reads it and hands on what it can.
  void on_readable();
  // When to look again: for a rank that waits (input is held), or whether the launcher came to
  // the terminal's foreground; nullopt when there is nothing to look for.
  std::optional<Os::Clock::time_point> next_look() const;
  // Hands held input to a rank that waits now, if one does.
  void look();
  bool holds_input() const { return !held_.empty(); }

 private:
  struct Reader {
    int rank = 0;
    pid_t pid = -1;
    UniqueFd pipe;  // the write end, non-blocking
  };
  // Whether `pid` is blocked reading its stdin (fd 0), as /proc/<pid>/task/*/syscall says.
  bool waits_on_stdin(pid_t pid);

  Os& os_;
  int terminal_;
  std::function<void(int rank)> before_answer_;
  std::vector<Reader> readers_;  // by rank, lowest first
  std::string held_;
  bool ended_ = false;       // the terminal gave an end of file
  bool foreground_ = false;  // at the last fd_to_watch()
};

}  // namespace acc::launcher

#pragma once

// Decides when a worker group is stuck: no worker made progress (a line of output, a beat, a
// completed collective, a section opened or closed) for the stall timeout. A worker's clock
// starts at its first sign of progress: until then it is starting up (importing torch, loading a
// model, waiting for the others in init_process_group), which has its own, longer limit
// (--stall_init_timeout). A group whose every worker is busy on CPU outside collectives is
// computing, not stuck: the caller says so with busy(), and that holds the stall off too.
// Pure: the caller passes the time, so tests drive it with a fake clock and the agent with
// steady_clock.

#include <chrono>
#include <vector>

namespace acc::launcher {

class StallMonitor {
 public:
  using Clock = std::chrono::steady_clock;

  // `workers` local workers, all starting up at `start`: a worker that never shows progress is
  // stuck `init_timeout` after it; one that did, `timeout` after its last progress.
  StallMonitor(std::chrono::milliseconds timeout, int workers, Clock::time_point start,
               std::chrono::milliseconds init_timeout);

  // Worker `index` made progress at `now`: it has started, the group is no longer stalled, and a
  // later stall is a new one that is reported again.
  void progress(int index, Clock::time_point now);

  // Every worker is busy on CPU outside collectives at `now`: the group computes. Holds the stall
  // off for another timeout, as progress would, without counting as any worker's progress.
  void busy(Clock::time_point now);

  // True once per stall: the first call at which every worker is stuck (no progress for the
  // timeout, or still starting up past the start-up limit) and the group was not busy for the
  // timeout either. After it returns true it returns false until progress() or busy() and a new
  // full timeout.
  bool check(Clock::time_point now);

  // When check() should next be called (the poll timeout of the agent).
  Clock::time_point next_check() const;

  // Whether worker `index` has shown progress yet (its start-up is over).
  bool started(int index) const { return progress_count_[index] > 0; }
  Clock::time_point last_progress(int index) const { return last_progress_[index]; }
  // How many times progress() was called for `index`: the one that did the least is behind.
  long progress_count(int index) const { return progress_count_[index]; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  // When the group is stuck if nothing happens before then.
  Clock::time_point stuck_at() const;

  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds init_timeout_;
  Clock::time_point start_;
  Clock::time_point last_busy_;
  std::vector<Clock::time_point> last_progress_;
  std::vector<long> progress_count_;
  bool reported_ = false;
};

}  // namespace acc::launcher

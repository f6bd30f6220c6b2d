#pragma once

// Decides when a worker group is stuck: no worker made progress (a line of output, or a beat of
// libacc through the store) for the stall timeout. Pure: the caller passes the time, so tests
// drive it with a fake clock and the agent with steady_clock.

#include <chrono>
#include <vector>

namespace acc::launcher {

class StallMonitor {
 public:
  using Clock = std::chrono::steady_clock;

  // `workers` local workers, all counted as having made progress at `start` (a job that never
  // prints is a stall `timeout` after it started).
  StallMonitor(std::chrono::milliseconds timeout, int workers, Clock::time_point start);

  // Worker `index` made progress at `now`: the group is no longer stalled, and a later stall is
  // a new one that is reported again.
  void progress(int index, Clock::time_point now);

  // True once per stall: the first call at which no worker has made progress for the timeout.
  // After it returns true it returns false until progress() and a new full timeout.
  bool check(Clock::time_point now);

  // When check() should next be called (the poll timeout of the agent).
  Clock::time_point next_check() const;

  Clock::time_point last_progress(int index) const { return last_progress_[index]; }
  // How many times progress() was called for `index`: the one that did the least is behind.
  long progress_count(int index) const { return progress_count_[index]; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  Clock::time_point group_last_progress() const;

  std::chrono::milliseconds timeout_;
  std::vector<Clock::time_point> last_progress_;
  std::vector<long> progress_count_;
  bool reported_ = false;
};

}  // namespace acc::launcher

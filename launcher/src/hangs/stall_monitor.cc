#include "hangs/stall_monitor.h"

#include <algorithm>

namespace acc::launcher {

StallMonitor::StallMonitor(std::chrono::milliseconds timeout, int workers, Clock::time_point start,
                           std::chrono::milliseconds init_timeout)
    : timeout_(timeout),
      init_timeout_(init_timeout),
      start_(start),
      last_busy_(Clock::time_point::min()),
      last_progress_(workers, start),
      progress_count_(workers, 0) {}

void StallMonitor::progress(int index, Clock::time_point now) {
  last_progress_[index] = std::max(last_progress_[index], now);
  ++progress_count_[index];
  reported_ = false;
}

void StallMonitor::busy(Clock::time_point now) {
  last_busy_ = std::max(last_busy_, now);
  reported_ = false;
}

// The group is stuck when its last worker is: each worker starting up is stuck at the end of the
// start-up limit, each started one a timeout after its own last progress.
StallMonitor::Clock::time_point StallMonitor::stuck_at() const {
  Clock::time_point at = last_busy_ == Clock::time_point::min() ? start_ : last_busy_ + timeout_;
  for (size_t i = 0; i < last_progress_.size(); ++i)
    at = std::max(at,
                  progress_count_[i] > 0 ? last_progress_[i] + timeout_ : start_ + init_timeout_);
  return at;
}

bool StallMonitor::check(Clock::time_point now) {
  if (reported_ || last_progress_.empty()) return false;
  if (now < stuck_at()) return false;
  reported_ = true;
  return true;
}

StallMonitor::Clock::time_point StallMonitor::next_check() const {
  // A reported stall is not checked again until progress (a line wakes the agent anyway; a beat
  // or a collective is seen at the agent's next poll of the progress files).
  if (reported_ || last_progress_.empty()) return Clock::time_point::max();
  return stuck_at();
}

}  // namespace acc::launcher

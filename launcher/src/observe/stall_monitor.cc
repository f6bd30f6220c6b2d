#include "observe/stall_monitor.h"

#include <algorithm>

namespace acc::launcher {

StallMonitor::StallMonitor(std::chrono::milliseconds timeout, int workers, Clock::time_point start)
    : timeout_(timeout), last_progress_(workers, start), progress_count_(workers, 0) {}

void StallMonitor::progress(int index, Clock::time_point now) {
  last_progress_[index] = std::max(last_progress_[index], now);
  ++progress_count_[index];
  reported_ = false;
}

StallMonitor::Clock::time_point StallMonitor::group_last_progress() const {
  return *std::max_element(last_progress_.begin(), last_progress_.end());
}

bool StallMonitor::check(Clock::time_point now) {
  if (reported_ || last_progress_.empty()) return false;
  if (now - group_last_progress() < timeout_) return false;
  reported_ = true;
  return true;
}

StallMonitor::Clock::time_point StallMonitor::next_check() const {
  // A reported stall is not checked again until progress (a line wakes the agent anyway; a beat
  // is seen at the agent's next beat poll).
  if (reported_ || last_progress_.empty()) return Clock::time_point::max();
  return group_last_progress() + timeout_;
}

}  // namespace acc::launcher

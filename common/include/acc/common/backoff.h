#pragma once

// The pause between tries of a retry loop (connect to a store, poll etcd): it starts at `first`,
// doubles after each try up to `longest`, and never runs past the loop's deadline. One object per
// loop; not thread-safe. Header-only.
//
//   Backoff backoff(50ms, 1s);
//   while (!try_once()) {
//     if (clock.now() >= deadline) throw TimeoutError(...);
//     backoff.pause(deadline, clock);
//   }

#include <algorithm>
#include <chrono>

#include "acc/common/clock.h"

namespace acc {

class Backoff {
 public:
  // `first` > 0 and `longest` >= `first` (a smaller `longest` is raised to `first`).
  Backoff(std::chrono::milliseconds first, std::chrono::milliseconds longest)
      : first_(first), longest_(std::max(first, longest)), pause_(first) {}

  // The pause to take now, then doubles the next one (up to `longest`). Does not block.
  std::chrono::milliseconds next() {
    const std::chrono::milliseconds pause = pause_;
    pause_ = std::min(pause_ * 2, longest_);
    return pause;
  }

  // As next(), cut so that it ends by `deadline` of `clock` (0 once the deadline has passed).
  std::chrono::milliseconds next(Clock::time_point deadline, const Clock& clock) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock.now());
    return std::clamp(left, std::chrono::milliseconds(0), next());
  }

  // Blocks on `clock` for next(deadline, clock).
  void pause(Clock::time_point deadline, const Clock& clock) {
    clock.sleep_for(next(deadline, clock));
  }

  // Back to `first`, after a try that made progress.
  void reset() { pause_ = first_; }

 private:
  std::chrono::milliseconds first_;
  std::chrono::milliseconds longest_;
  std::chrono::milliseconds pause_;
};

}  // namespace acc

#pragma once

// The runtime's heartbeat for acc-launch's hang detection (--stall_timeout): a training step is
// progress even when the program prints nothing. Each beat adds 1 to store_keys::beat(rank) in the
// job's store, under the attempt's prefix; the launcher reads those counters.

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

#include "acc/common/clock.h"

namespace acc::runtime::detail {

class ProgressBeat {
 public:
  ProgressBeat(c10::intrusive_ptr<c10d::Store> store, int rank);

  // Called at each optimizer step; beats at most once a second, so a fast training loop costs
  // one store round trip a second. Never throws: a lost store is the process group's problem,
  // reported there.
  void step();

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  std::string key_;
  acc::Clock::time_point next_beat_{};
  bool broken_ = false;
};

}  // namespace acc::runtime::detail

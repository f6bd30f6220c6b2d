#include "acc/common/clock.h"

#include <thread>

namespace acc {

const Clock& Clock::machine() {
  struct Machine final : Clock {
    time_point now() const override { return std::chrono::steady_clock::now(); }
    wall_time_point wall_now() const override { return std::chrono::system_clock::now(); }
    void sleep_until(time_point deadline) const override {
      std::this_thread::sleep_until(deadline);
    }
  };
  // Never destroyed, so that code run from a static destructor still has its clock.
  static const Machine* const kMachine = new Machine;
  return *kMachine;
}

}  // namespace acc

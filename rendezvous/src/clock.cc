#include "acc/rendezvous/clock.h"

#include <thread>

namespace acc::rendezvous {

const Clock& Clock::steady() {
  struct Steady final : Clock {
    time_point now() const override { return std::chrono::steady_clock::now(); }
    void sleep_until(time_point deadline) const override {
      std::this_thread::sleep_until(deadline);
    }
  };
  // Never destroyed, so a rendezvous used from a static destructor still has its clock.
  static const Steady* const kSteady = new Steady;
  return *kSteady;
}

}  // namespace acc::rendezvous

#include "acc/rendezvous/clock.h"

namespace acc::rendezvous {

const Clock& Clock::steady() {
  struct Steady final : Clock {
    time_point now() const override { return std::chrono::steady_clock::now(); }
  };
  // Never destroyed, so a rendezvous used from a static destructor still has its clock.
  static const Steady* const kSteady = new Steady;
  return *kSteady;
}

}  // namespace acc::rendezvous

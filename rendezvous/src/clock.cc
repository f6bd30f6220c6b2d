#include "acc/rendezvous/clock.h"

#include <algorithm>

#include "acc/common/error.h"
#include "acc/rendezvous/key_value_store.h"

namespace acc::rendezvous {

bool Clock::wait_for_keys(KeyValueStore& store, const std::vector<std::string>& keys,
                          time_point deadline) const {
  // At least 1 ms: a store wait of 0 may mean "no timeout".
  const auto left = std::max(std::chrono::milliseconds(1),
                             std::chrono::ceil<std::chrono::milliseconds>(deadline - now()));
  try {
    store.wait(keys, left);
    return true;
  } catch (const TimeoutError&) {
    return false;
  }
}

const Clock& Clock::steady() {
  struct Steady final : Clock {
    time_point now() const override { return acc::Clock::machine().now(); }
    wall_time_point wall_now() const override { return acc::Clock::machine().wall_now(); }
    void sleep_until(time_point deadline) const override {
      acc::Clock::machine().sleep_until(deadline);
    }
  };
  // Never destroyed, so a rendezvous used from a static destructor still has its clock.
  static const Steady* const kSteady = new Steady;
  return *kSteady;
}

}  // namespace acc::rendezvous

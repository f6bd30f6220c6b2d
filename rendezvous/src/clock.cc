#include "acc/rendezvous/clock.h"

#include <algorithm>
#include <thread>

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
    time_point now() const override { return std::chrono::steady_clock::now(); }
    wall_time_point wall_now() const override { return std::chrono::system_clock::now(); }
    void sleep_until(time_point deadline) const override {
      std::this_thread::sleep_until(deadline);
    }
  };
  // Never destroyed, so a rendezvous used from a static destructor still has its clock.
  static const Steady* const kSteady = new Steady;
  return *kSteady;
}

}  // namespace acc::rendezvous
